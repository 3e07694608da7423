package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/arena"
)

// Shutting down under 200 streams (a quarter of them short): every
// client gets a complete stream (all its tokens, finish_reason length),
// or one cut cleanly (finish_reason abort, then [DONE]), or a clean
// refusal (503, or no connection); and the device holds nothing after
// (goleak checks the goroutines).
func TestShutdownUnderLoad(t *testing.T) {
	ts := startTestServer(t, 4000)
	const clients = 200
	var started sync.WaitGroup
	started.Add(64) // max_batch_size: the first 64 streams run at once
	var first atomic.Int32
	began := func() { // a client's stream started, or it was refused
		if first.Add(1) <= 64 {
			started.Done()
		}
	}
	var complete, cut, refused, unavailable atomic.Int32
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens := 200
			if i%4 == 0 {
				tokens = 5 // these finish before the deadline
			}
			body := fmt.Sprintf(`{"prompt": "client %s", "max_tokens": %d, "stream": true}`, strings.Repeat("x", i%50), tokens)
			resp, err := http.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				refused.Add(1)
				began()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				refused.Add(1)
				unavailable.Add(1)
				began()
				return
			}
			chunks, done := readStreamNotify(t, resp, began)
			n, reason := streamed(chunks, 0)
			switch {
			case done && reason == finishLength && n == tokens:
				complete.Add(1)
			case done && reason == finishAbort && n < tokens:
				cut.Add(1)
			default:
				t.Errorf("client %d: %d tokens, finish %q, [DONE] %v: neither complete nor cut cleanly", i, n, reason, done)
			}
		}()
	}
	started.Wait()
	ts.stop(t, 300*time.Millisecond)
	wg.Wait()
	if complete.Load()+cut.Load()+refused.Load() != clients || cut.Load() == 0 || complete.Load() == 0 {
		t.Fatalf("%d complete, %d cut, %d refused of %d: want every client accounted for, some complete and some cut", complete.Load(), cut.Load(), refused.Load(), clients)
	}
	t.Logf("%d complete, %d cut, %d refused", complete.Load(), cut.Load(), refused.Load())
	// Every answer is counted by the status sent: the cut streams' 200 too.
	want := map[string]float64{"completions 200": float64(complete.Load() + cut.Load())}
	if n := unavailable.Load(); n > 0 {
		want["completions 503"] = float64(n)
	}
	if got := ts.requestsTotal(t); !maps.Equal(got, want) {
		t.Fatalf("gpuarena_server_requests_total by endpoint and code: %v, want %v", got, want)
	}
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() != "gpuarena_bytes_in_use" {
			continue
		}
		for _, m := range mf.GetMetric() {
			series++
			if v := m.GetGauge().GetValue(); v != 0 {
				t.Fatalf("after shutdown: %v B in use by %v", v, m.GetLabel())
			}
		}
	}
	if series == 0 {
		t.Fatal("no gpuarena_bytes_in_use series after shutdown")
	}
}

// readStreamNotify is readStream calling started once the first event
// arrived.
func readStreamNotify(t *testing.T, resp *http.Response, started func()) ([]completion, bool) {
	r := &notifyReader{r: resp.Body, first: started}
	return readStream(t, r)
}

// notifyReader calls first once, at the first byte read.
type notifyReader struct {
	r     interface{ Read([]byte) (int, error) }
	first func()
	once  sync.Once
}

func (n *notifyReader) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if k > 0 {
		n.once.Do(n.first)
	}
	return k, err
}

// A shutdown drains before the listener closes: while a stream is in
// flight, /readyz answers 503 and a new request is refused with 503, and
// the stream runs to its end (all its tokens, finish_reason length,
// [DONE]); then the server stops with nothing left. (The stream's 4,000
// tokens take 4,000 steps; the checks during the drain take two requests.)
func TestShutdownDrains(t *testing.T) {
	ts := startTestServerWith(t, 4000, arena.Options{MaxBatchTokens: 512, MaxSeqLen: 4096, MaxBatchSize: 64})
	resp := ts.post(t, "/v1/completions", `{"prompt": "drain me", "max_tokens": 4000, "stream": true}`)
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if _, err := body.ReadString('\n'); err != nil { // the stream has started
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ts.stop(t, 30*time.Second)
	}()
	waitDraining(t, ts.url)
	var refused completion
	if code := ts.postJSON(t, "/v1/completions", `{"prompt": "too late", "max_tokens": 2}`, &refused); code != http.StatusServiceUnavailable || refused.Error == nil || !strings.Contains(refused.Error.Message, "shutting down") {
		t.Fatalf("a request during the drain: %d, %+v; want 503, shutting down", code, refused.Error)
	}
	chunks, done := readStream(t, body)
	n, reason := streamed(chunks, 1) // the first event was read above
	if !done || reason != finishLength || n != 4000 {
		t.Fatalf("the stream in flight: %d tokens, finish %q, [DONE] %v; want 4000, length, true", n, reason, done)
	}
	<-stopped
	if _, err := http.Get(ts.url + "/readyz"); err == nil {
		t.Fatal("the listener is open after the shutdown")
	}
}

// A second signal during the drain cuts it short: the stream in flight
// ends at once with finish_reason abort and [DONE], as at the deadline
// (here 10 minutes away), everything is released (the ledger at 0 after
// the release, checked by the shutdown) and the command exits 0. The
// first signal is the command's context ending, the second cut closing
// (main relays SIGTERM and Ctrl-C so: signals.go).
func TestSecondSignalCutsTheDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := make(chan struct{})
	addrs := make(chan string, 1)
	exited := make(chan int, 1)
	var stderr bytes.Buffer // read once the command has exited
	go func() {
		exited <- executeCut(ctx, cut, []string{"--config", "../configs/qwen3-0.6b.json", "--max-batch-tokens", "512", "--max-seq-len", "4096",
			"--kv-blocks", "4000", "--listen", "127.0.0.1:0", "--shutdown-timeout", "10m"}, io.Discard, &stderr, func(addr string) { addrs <- addr })
	}()
	var url string
	select {
	case addr := <-addrs:
		url = "http://" + addr
	case code := <-exited:
		t.Fatalf("exit %d before serving:\n%s", code, stderr.String())
	}
	resp, err := http.Post(url+"/v1/completions", "application/json", jsonBody(`{"prompt": "cut me short", "max_tokens": 4000, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if _, err := body.ReadString('\n'); err != nil { // the stream has started
		t.Fatal(err)
	}
	cancel() // the first signal
	waitDraining(t, url)
	close(cut) // the second
	chunks, done := readStream(t, body)
	n, reason := streamed(chunks, 1) // the first event was read above
	if !done || reason != finishAbort || n >= 4000 {
		t.Errorf("the stream in flight at the second signal: %d tokens, finish %q, [DONE] %v; want fewer than 4000, abort, true", n, reason, done)
	}
	select {
	case code := <-exited:
		out := stderr.String()
		if code != exitOK || !strings.Contains(out, "a second signal during the drain") || !strings.Contains(out, "ledger_bytes=0") ||
			!strings.Contains(out, "everything released") {
			t.Fatalf("exit %d; want 0, the drain cut by the second signal, the ledger at 0; stderr:\n%s", code, out)
		}
	case <-time.After(time.Minute):
		t.Fatal("the server had not exited a minute after the second signal")
	}
}

// waitDraining polls url's /readyz until it answers 503: the server
// started to drain. The listener stays open while it drains, so an error
// fails the test.
func waitDraining(t *testing.T, url string) {
	t.Helper()
	for ready := http.StatusOK; ready != http.StatusServiceUnavailable; {
		r, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain: %v (the listener closed with a stream in flight)", err)
		}
		r.Body.Close()
		ready = r.StatusCode
	}
}

// streamed counts a stream's events that carry text, after read of them
// already read, and returns the last finish reason.
func streamed(chunks []completion, read int) (n int, reason string) {
	n = read
	for _, c := range chunks {
		for _, ch := range c.Choices {
			if ch.Text != "" {
				n++
			}
			if ch.FinishReason != nil {
				reason = *ch.FinishReason
			}
		}
	}
	return n, reason
}
