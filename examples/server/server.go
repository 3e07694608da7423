package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// cutWait is how long a shutdown past its deadline waits for the cut
// streams' handlers to return before closing every connection.
const cutWait = time.Second

// server is the inference server: the manager with its weights, arena and
// KV cache, the engine that steps it, and the HTTP API in front.
type server struct {
	m       *gpuarena.Manager
	engine  *engine
	reg     *prometheus.Registry
	metrics *serverMetrics
	history *kvHistory
	log     *slog.Logger
	name    string // the served model's name
	limit   int    // min(max_seq_len, the tokens the KV cache holds): the longest request
	vocab   int32  // vocab_size: a prompt of token ids must stay below it
	plan    *arena.Plan
	fit     *arena.FitReport
	started time.Time

	http     *http.Server
	draining atomic.Bool // /readyz answers 503
	inflight flight      // the generation requests in flight
	// released is the ledger's counters after shutdown's release, before
	// the manager closes: CurrentBytes 0 and Frees equal to Allocations
	// unless something leaked (shutdown then returns an error).
	released device.LedgerCounters
}

// handler is the server's routes.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", s.generating("completions", s.handleCompletions))
	mux.HandleFunc("POST /v1/chat/completions", s.generating("chat", s.handleChat))
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("GET /debug/ledger", s.handleLedger)
	mux.HandleFunc("GET /debug/memory", s.handleMemory)
	return mux
}

// serve answers on ln until shutdown; it returns nil after a shutdown,
// at once when shutdown came first.
func (s *server) serve(ln net.Listener) error {
	s.log.Info("server: listening", "addr", ln.Addr().String(), "model", s.name)
	if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// shutdown stops the server gracefully. First it drains, the listener
// still open: /readyz turns 503 (a load balancer sees the server leave),
// new generation requests get 503, and those in flight run to their end
// until ctx ends (its deadline, or earlier: the command cancels it at a
// second signal, its cause saying why). Then the listener closes; once ctx
// has ended the streams still open are cut (each choice ends with
// finish_reason "abort" and the stream with [DONE]). Then the engine stops, and the manager
// releases everything and closes. It returns the first error of those
// steps.
func (s *server) shutdown(ctx context.Context) error {
	s.draining.Store(true)
	idle := s.inflight.drain()
	var errs []error
	select {
	case <-idle:
	case <-ctx.Done():
	}
	if err := s.http.Shutdown(ctx); err != nil {
		s.log.Warn("server: requests still running at the end of the drain; cutting them", "why", context.Cause(ctx))
		s.engine.close() // every live choice ends with "abort"
		// The cut handlers end at once; connections accepted but
		// without a request yet (which Shutdown waits 5 s for) are
		// closed after cutWait.
		cut, cancel := context.WithTimeout(context.Background(), cutWait)
		if err := s.http.Shutdown(cut); err != nil {
			errs = append(errs, s.http.Close())
		}
		cancel()
	}
	s.engine.close()
	rel, err := s.m.Release(context.Background())
	if errors.Is(err, gpuarena.ErrNoArena) {
		err = nil
	}
	errs = append(errs, err)
	if l, lerr := s.m.Ledger(context.Background()); lerr != nil {
		errs = append(errs, lerr)
	} else if s.released = l.Counters; l.Counters.CurrentBytes != 0 || len(l.Entries) != 0 {
		errs = append(errs, fmt.Errorf("server: %d B in %d allocations left on the device after release", l.Counters.CurrentBytes, len(l.Entries)))
	}
	errs = append(errs, s.m.Close())
	s.log.Info("server: released", "allocations_freed", rel.Freed, "bytes_freed", rel.Bytes, "ledger_bytes", s.released.CurrentBytes)
	return errors.Join(errs...)
}

// handleHealth is liveness: 200 while the process serves HTTP.
func (s *server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady is readiness: 200 while the engine takes requests, 503
// while shutting down or after a failed step.
func (s *server) handleReady(w http.ResponseWriter, _ *http.Request) {
	switch {
	case s.draining.Load():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
	case s.m.Err() != nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "device failed", "error": s.m.Err().Error()})
	default:
		select {
		case <-s.engine.done:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "engine stopped"})
		default:
			writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		}
	}
}

// handleLedger serves GET /debug/ledger: the manager's ledger snapshot.
func (s *server) handleLedger(w http.ResponseWriter, r *http.Request) {
	l, err := s.m.Ledger(r.Context())
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: apiErrorBody{Message: err.Error(), Type: "server_error"}})
		return
	}
	writeJSON(w, http.StatusOK, l)
}
