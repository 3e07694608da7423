package main

import (
	"bufio"
	"fmt"
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
	var complete, cut, refused atomic.Int32
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
				if first.Add(1) <= 64 {
					started.Done()
				}
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				refused.Add(1)
				if first.Add(1) <= 64 {
					started.Done()
				}
				return
			}
			chunks, done := readStreamNotify(t, resp, func() {
				if first.Add(1) <= 64 {
					started.Done()
				}
			})
			n, reason := 0, ""
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
	for ready := http.StatusOK; ready != http.StatusServiceUnavailable; {
		r, err := http.Get(ts.url + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain: %v (the listener closed with a stream in flight)", err)
		}
		r.Body.Close()
		ready = r.StatusCode
	}
	var refused completion
	if code := ts.postJSON(t, "/v1/completions", `{"prompt": "too late", "max_tokens": 2}`, &refused); code != http.StatusServiceUnavailable || refused.Error == nil || !strings.Contains(refused.Error.Message, "shutting down") {
		t.Fatalf("a request during the drain: %d, %+v; want 503, shutting down", code, refused.Error)
	}
	chunks, done := readStream(t, body)
	n, reason := 1, "" // the first event was read above
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
	if !done || reason != finishLength || n != 4000 {
		t.Fatalf("the stream in flight: %d tokens, finish %q, [DONE] %v; want 4000, length, true", n, reason, done)
	}
	<-stopped
	if _, err := http.Get(ts.url + "/readyz"); err == nil {
		t.Fatal("the listener is open after the shutdown")
	}
}
