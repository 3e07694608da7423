package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// maxModelLen is /v1/models' max_model_len.
func (ts *testServer) maxModelLen(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(ts.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			MaxModelLen int `json:"max_model_len"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if err != nil || len(models.Data) != 1 {
		t.Fatalf("/v1/models: %+v (%v)", models, err)
	}
	return models.Data[0].MaxModelLen
}

// refusesPast checks that a request of limit+1 tokens is a 400 naming the
// limit, and that one of limit tokens is served.
func (ts *testServer) refusesPast(t *testing.T, limit int) {
	t.Helper()
	var e completion
	body := fmt.Sprintf(`{"prompt": %q, "max_tokens": %d}`, strings.Repeat("p", 10), limit-10+1)
	if code := ts.postJSON(t, "/v1/completions", body, &e); code != http.StatusBadRequest || e.Error == nil || !strings.Contains(e.Error.Message, fmt.Sprint(limit)) ||
		e.Error.Param == nil || *e.Error.Param != "max_tokens" {
		t.Fatalf("%d tokens on a limit of %d: status %d, %+v; want 400 naming %d and max_tokens", limit+1, limit, code, e.Error, limit)
	}
	// A prompt that alone passes the limit: the field to change is the prompt.
	e = completion{}
	body = fmt.Sprintf(`{"prompt": %q, "max_tokens": 1}`, strings.Repeat("p", limit+1))
	if code := ts.postJSON(t, "/v1/completions", body, &e); code != http.StatusBadRequest || e.Error == nil || e.Error.Param == nil || *e.Error.Param != "prompt" {
		t.Fatalf("a prompt of %d tokens on a limit of %d: status %d, %+v; want 400 naming the prompt", limit+1, limit, code, e.Error)
	}
	body = fmt.Sprintf(`{"prompt": %q, "max_tokens": 1}`, strings.Repeat("p", limit-1))
	if code := ts.postJSON(t, "/v1/completions", body, &e); code != http.StatusOK {
		t.Fatalf("%d tokens on a limit of %d: status %d, %+v", limit, limit, code, e.Error)
	}
}

// A cache of 16 blocks of 16 tokens holds 240 tokens (block 0 is the
// pool's null block): /v1/models says so, and a request for more is a 400
// naming the limit, not a wait that ends in a server error.
func TestRequestLimitIsTheCache(t *testing.T) {
	ts := startTestServer(t, 16)
	if got := ts.maxModelLen(t); got != 240 {
		t.Fatalf("max_model_len %d, want 240", got)
	}
	ts.refusesPast(t, 240)
}

// With chunked prefill max_batch_tokens does not limit a request:
// max_model_len is max_seq_len (the cache holds more), a prompt three
// times max_batch_tokens is served, and its output is the one a server
// whose max_batch_tokens holds the prompt whole gives.
func TestLongPromptChunked(t *testing.T) {
	chunked := startTestServerWith(t, 4000, arena.Options{MaxBatchTokens: 64, MaxSeqLen: 1024, MaxBatchSize: 16})
	whole := startTestServerWith(t, 4000, arena.Options{MaxBatchTokens: 1024, MaxSeqLen: 1024, MaxBatchSize: 16})
	if got := chunked.maxModelLen(t); got != 1024 {
		t.Fatalf("max_batch_tokens 64, max_seq_len 1024: max_model_len %d, want 1024", got)
	}
	chunked.refusesPast(t, 1024)
	prompt := strings.Repeat("a long prompt, ", 13) // 195 tokens: three steps' worth and more
	body := fmt.Sprintf(`{"prompt": %q, "max_tokens": 24, "n": 2, "seed": 3}`, prompt)
	var a, b completion
	if code := chunked.postJSON(t, "/v1/completions", body, &a); code != http.StatusOK || len(a.Choices) != 2 {
		t.Fatalf("chunked: %d, %+v", code, a)
	}
	if code := whole.postJSON(t, "/v1/completions", body, &b); code != http.StatusOK || len(b.Choices) != 2 {
		t.Fatalf("whole: %d, %+v", code, b)
	}
	for i := range a.Choices {
		if a.Choices[i].Text == "" || a.Choices[i].Text != b.Choices[i].Text {
			t.Fatalf("choice %d: %q chunked, %q whole", i, a.Choices[i].Text, b.Choices[i].Text)
		}
	}
	if seqs, used := chunked.kvClean(t); seqs != 0 || used != 0 {
		t.Fatalf("after the requests: %d sequences, %d blocks used", seqs, used)
	}
	// The engine is idle (kvClean waited for it): its scheduler may be read.
	if st := chunked.engine.sched.Stats(); st.Chunks < 3 {
		t.Fatalf("a 195-token prompt on max_batch_tokens 64: %d chunks, want at least 3 (%+v)", st.Chunks, st)
	}
}
