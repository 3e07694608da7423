package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer serves what Run reads besides the completions: model "m" on
// /v1/models and PreemptionsMetric at 0 on /metrics; complete answers
// POST /v1/completions. It closes when t ends.
func fakeServer(t *testing.T, complete http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"data":[{"id":"m"}]}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE %s counter\n%s 0\n", PreemptionsMetric, PreemptionsMetric)
	})
	mux.HandleFunc("POST /v1/completions", complete)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// refuse answers 400 as the server does for a prompt past max_model_len.
func refuse(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, `{"error":{"message":"prompt too long"}}`, http.StatusBadRequest)
}

// complete streams three one-token chunks, the usage and [DONE].
func complete(w http.ResponseWriter, _ *http.Request) {
	for range 3 {
		io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
	}
	io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n")
}

func loadConfig(url string) Config {
	return Config{URL: url, Clients: 4, Requests: 8, Duration: time.Minute, Seed: 1, Mix: DefaultMix}
}

// A run in which every request failed returns its report and a
// RequestsFailedError saying how many of how many, and the first error.
func TestLoadgenFailedRequestsFailTheRun(t *testing.T) {
	rep, err := Run(context.Background(), loadConfig(fakeServer(t, refuse)))
	var rf *RequestsFailedError
	if !errors.As(err, &rf) || rf.Failed != 8 || rf.Sent != 8 || !strings.Contains(rf.First, "status 400") || !strings.Contains(rf.First, "prompt too long") {
		t.Fatalf("error %v, want 8 of 8 requests failed with the 400", err)
	}
	if !strings.Contains(err.Error(), "8 of 8 requests failed; the first: status 400") {
		t.Errorf("message %q", err)
	}
	if rep == nil || rep.Failed != 8 || rep.Completed != 0 || rep.Cut != 0 || len(rep.Errors) != maxErrors {
		t.Errorf("report %+v, want 8 failed and %d errors kept", rep, maxErrors)
	}
}

// One failed request of eight fails the run too; the others are counted.
func TestLoadgenOneFailedRequestFailsTheRun(t *testing.T) {
	var n atomic.Int32
	url := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 5 {
			refuse(w, r)
			return
		}
		complete(w, r)
	})
	rep, err := Run(context.Background(), loadConfig(url))
	var rf *RequestsFailedError
	if !errors.As(err, &rf) || rf.Failed != 1 || rf.Sent != 8 {
		t.Fatalf("error %v, want 1 of 8 requests failed", err)
	}
	if rep.Completed != 7 || rep.Failed != 1 || rep.OutputTokens != 21 || rep.TTFT.Samples != 7 || rep.ITL.Samples != 14 {
		t.Errorf("report %+v, want 7 completed of 3 tokens each", rep)
	}
}

// Requests that the run's Duration cuts are counted as cut, not failed,
// and the run succeeds.
func TestLoadgenCutRequestsAreNotFailures(t *testing.T) {
	url := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stream that never ends
	})
	cfg := loadConfig(url)
	cfg.Duration = 50 * time.Millisecond
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v, want no error for requests cut by Duration", err)
	}
	if rep.Failed != 0 || rep.Completed != 0 || rep.Cut < cfg.Clients || rep.Cut > cfg.Requests || len(rep.Errors) != 0 {
		t.Errorf("report %+v, want %d to %d cut and none failed", rep, cfg.Clients, cfg.Requests)
	}
}
