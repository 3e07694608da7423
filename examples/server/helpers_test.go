package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// testServer is a server on loopback over Qwen3-0.6B's config (no
// weights) on a simulated H200, with small limits: max_batch_tokens 512,
// max_seq_len 512, kvBlocks KV blocks.
type testServer struct {
	*server
	url  string
	done chan error
}

func startTestServer(t *testing.T, kvBlocks int64) *testServer {
	t.Helper()
	return startTestServerWith(t, kvBlocks, arena.Options{MaxBatchTokens: 512, MaxSeqLen: 512, MaxBatchSize: 64})
}

// startTestServerWith is startTestServer with other serving options.
func startTestServerWith(t *testing.T, kvBlocks int64, opts arena.Options) *testServer {
	t.Helper()
	st := settings{config: "../configs/qwen3-0.6b.json", utilization: 0.9, kvBlocks: kvBlocks, opts: opts,
		backend: gpuworker.BackendConfig{Kind: gpuworker.KindHostSim, HostSim: gpuworker.HostSimConfig{Name: "hostsim H200", TotalBytes: gpuworker.H200Bytes}}}
	s, err := start(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{server: s, url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() { ts.done <- s.serve(ln) }()
	t.Cleanup(func() { ts.stop(t, 10*time.Second) })
	return ts
}

// stop shuts the server down (once) and checks that it released every
// byte.
func (ts *testServer) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	if ts.done == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := ts.shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := <-ts.done; err != nil {
		t.Errorf("serve: %v", err)
	}
	ts.done = nil
	l, err := ts.m.Ledger(context.Background())
	if err == nil {
		t.Errorf("ledger readable after close: %+v", l.Counters)
	}
}

// post sends body as JSON to path and returns the response.
func (ts *testServer) post(t *testing.T, path, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(ts.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// postJSON posts body and decodes the JSON answer into v, returning the
// status.
func (ts *testServer) postJSON(t *testing.T, path, body string, v any) int {
	t.Helper()
	resp := ts.post(t, path, body)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %s: %v", path, b, err)
	}
	return resp.StatusCode
}

// completion is a decoded completion or chunk.
type completion struct {
	Choices []struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
		Message      *struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	Error *struct {
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// readStream reads an SSE stream's chunks up to [DONE]; done reports
// whether [DONE] came.
func readStream(t *testing.T, r io.Reader) (chunks []completion, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return chunks, true
		}
		var c completion
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Errorf("chunk %q: %v", line, err)
			return chunks, false
		}
		chunks = append(chunks, c)
	}
	return chunks, false
}

// kvClean waits until the engine holds nothing and returns the pool's
// sequences and used blocks.
func (ts *testServer) kvClean(t *testing.T) (seqs, used int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.engine.quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := ts.m.KVStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sequences, st.Groups[0].Used
}

// asError is errors.As.
func asError[T error](err error, target *T) bool { return errors.As(err, target) }

// jsonBody is a request body of s.
func jsonBody(s string) *strings.Reader { return strings.NewReader(s) }
