package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
