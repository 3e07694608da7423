package node

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// noiseInterval is how often one of upstream's repeated failures (the same
// message about the same seed) is logged; the repeats in between are
// counted in the next line's "repeats".
const noiseInterval = time.Minute

// repeatedUpstreamErrors are the messages protoactor-go's automanaged
// provider logs at error level on every poll, for every seed that does not
// answer (cluster/clusterproviders/automanaged/automanaged.go,
// checkNodes and monitorStatuses): a node whose peer left would log one
// every --membership-refresh for good. They are warnings (the member list
// already dropped the peer) and are logged once per noiseInterval.
var repeatedUpstreamErrors = map[string]bool{
	"Bad connection to the node health status": true,
	"Couldn't request node health status":      true,
	"Bad response from the node health status": true,
	"Bad data from the node health status":     true,
	"Failure reaching nodes":                   true,
}

// membershipEndpointStopped is what the automanaged provider logs at error
// level when its HTTP server returns, which after Shutdown is
// http.ErrServerClosed (automanaged.go, UpdateTTL).
const membershipEndpointStopped = "Automanaged server stopping..!"

// endpointClosed is what protoactor-go's remote logs at error level when a
// connection to a peer ends, which is codes.Canceled when this side closed
// it after the peer's DisconnectRequest: every client ("arenactl
// cluster") that leaves (remote/endpoint_writer.go, initializeInternal).
const endpointClosed = "EndpointWriter lost connection"

// quietHandler wraps the handler of the logger protoactor-go logs through
// (the actor system's): the repeated automanaged failures become warnings
// at most once per noiseInterval per message and seed; the membership
// endpoint's "stopping" error after a graceful Shutdown (http.ErrServerClosed)
// is logged at debug level, and a connection this side closed (a peer
// that left: codes.Canceled) at info level. Everything else passes
// unchanged, the remote's failed connection attempts included (at most
// remote.Config.MaxRetryCount, 5, two seconds apart, per peer).
type quietHandler struct {
	slog.Handler
	state *noiseState
}

// noiseState is what the handler and its WithAttrs/WithGroup copies share.
type noiseState struct {
	now  func() time.Time
	mu   sync.Mutex
	last map[string]noiseEntry
}

// noiseEntry is one repeated failure: when it was last logged, and the
// repeats dropped since.
type noiseEntry struct {
	at      time.Time
	dropped int
}

// newQuietHandler wraps h, with now as the clock of the intervals.
func newQuietHandler(h slog.Handler, now func() time.Time) *quietHandler {
	return &quietHandler{Handler: h, state: &noiseState{now: now, last: map[string]noiseEntry{}}}
}

// Handle passes r on, downgraded or dropped as the type says; a record
// downgraded below what the wrapped handler takes is dropped.
func (h *quietHandler) Handle(ctx context.Context, r slog.Record) error {
	switch {
	case r.Message == membershipEndpointStopped && errors.Is(recordError(r), http.ErrServerClosed):
		r = relevel(r, slog.LevelDebug)
	case r.Message == endpointClosed && status.Code(recordError(r)) == codes.Canceled:
		r = relevel(r, slog.LevelInfo)
	case repeatedUpstreamErrors[r.Message]:
		key := r.Message + "\x00" + recordString(r, "autoManMemberUrl")
		dropped, ok := h.state.admit(key)
		if !ok {
			return nil
		}
		r = relevel(r, slog.LevelWarn)
		r.AddAttrs(slog.Int("repeats", dropped), slog.Duration("logged_every", noiseInterval))
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs and WithGroup keep the wrapper and its shared state.
func (h *quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &quietHandler{Handler: h.Handler.WithAttrs(as), state: h.state}
}

// WithGroup: see WithAttrs.
func (h *quietHandler) WithGroup(name string) slog.Handler {
	return &quietHandler{Handler: h.Handler.WithGroup(name), state: h.state}
}

// admit says whether key's failure is logged now (the first time, or
// noiseInterval after it was last logged) and how many were dropped since.
func (s *noiseState) admit(key string) (dropped int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e, seen := s.last[key]
	if seen && now.Sub(e.at) < noiseInterval {
		e.dropped++
		s.last[key] = e
		return 0, false
	}
	s.last[key] = noiseEntry{at: now}
	return e.dropped, true
}

// relevel is r at level l, with r's attributes.
func relevel(r slog.Record, l slog.Level) slog.Record {
	out := slog.NewRecord(r.Time, l, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return out
}

// recordError is the error of r's "error" attribute, or nil.
func recordError(r slog.Record) error {
	var err error
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			err, _ = a.Value.Any().(error)
			return false
		}
		return true
	})
	return err
}

// recordString is r's attribute key as a string, or "".
func recordString(r slog.Record, key string) string {
	s := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			s = a.Value.String()
			return false
		}
		return true
	})
	return s
}
