package main

import (
	"bufio"
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/arena"
)

// gpuarena_server_requests_total counts every generation request
// answered, by the status sent: a stream whose client went away
// mid-stream under its 200, a non-streaming request whose client went
// away before its answer under 499 (nothing was sent), a bad request under
// its 400, a complete one under 200. The shutdown waits for the requests in
// flight, so every one is counted once it returns.
func TestRequestsCounted(t *testing.T) {
	ts := startTestServerWith(t, 4000, arena.Options{MaxBatchTokens: 512, MaxSeqLen: 4096, MaxBatchSize: 64})

	// A stream its client cuts after the first event.
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/completions", jsonBody(`{"prompt": "cut me", "max_tokens": 4000, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || resp.StatusCode != http.StatusOK { // the stream has started
		t.Fatalf("stream: %d, %v", resp.StatusCode, err)
	}
	cancel()
	resp.Body.Close()

	// A non-streaming request its client leaves before the answer. The
	// client asks for "100 Continue", so its body leaves only once the
	// handler reads it: once the body is written, the handler runs.
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	wrote := make(chan struct{})
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(wrote) }})
	req, err = http.NewRequestWithContext(traced, http.MethodPost, ts.url+"/v1/chat/completions",
		jsonBody(`{"messages": [{"role": "user", "content": "leave me"}], "max_tokens": 4000}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	answered := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-wrote
	cancel()
	if err := <-answered; !errors.Is(err, context.Canceled) {
		t.Fatalf("the non-streaming request whose client left: %v; want the client's context.Canceled (it was answered before its client left)", err)
	}

	var bad, good completion
	if code := ts.postJSON(t, "/v1/completions", `{"prompt": "a", "max_tokens": 0}`, &bad); code != http.StatusBadRequest {
		t.Fatalf("max_tokens 0: %d, want 400", code)
	}
	if code := ts.postJSON(t, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "max_tokens": 2}`, &good); code != http.StatusOK {
		t.Fatalf("chat: %d, want 200", code)
	}

	ts.stop(t, 10*time.Second)
	want := map[string]float64{
		"completions 200": 1, // the stream its client cut
		"completions 400": 1,
		"chat 499":        1, // the request its client left
		"chat 200":        1,
	}
	if got := ts.requestsTotal(t); !maps.Equal(got, want) {
		t.Fatalf("gpuarena_server_requests_total by endpoint and code: %v, want %v", got, want)
	}
}

// requestsTotal is gpuarena_server_requests_total by "endpoint code".
func (ts *testServer) requestsTotal(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "gpuarena_server_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["endpoint"]+" "+labels["code"]] = m.GetCounter().GetValue()
		}
	}
	return out
}
