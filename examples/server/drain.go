package main

import (
	"net/http"
	"sync"
)

// flight counts the generation requests in flight, so that a shutdown
// can let them end with the listener still open — /readyz answering 503
// meanwhile, so that a load balancer sees the server leave — and refuse
// new ones.
type flight struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed when n reaches 0 while draining
}

// enter counts a request in; false once draining (refuse it).
func (f *flight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.n++
	return true
}

// leave counts a request out.
func (f *flight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// drain refuses requests from now on and returns a channel closed once
// none is in flight. Called once.
func (f *flight) drain() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.draining = true
	idle := make(chan struct{})
	if f.n == 0 {
		close(idle)
	} else {
		f.idle = idle
	}
	return idle
}

// generating wraps a generation endpoint: its body read up to
// maxRequestBytes, the request counted in flight (or refused with 503
// while the server drains) and, once answered, in
// gpuarena_server_requests_total by the status it was sent — before it
// leaves the flight, so a shutdown that waited for the flight finds every
// request counted.
func (s *server) generating(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
		sw := &statusWriter{ResponseWriter: w}
		if !s.inflight.enter() {
			w.Header().Set("Retry-After", "1")
			writeError(sw, &requestError{status: http.StatusServiceUnavailable, msg: "the server is shutting down: send the request to another replica"})
			s.metrics.countRequest(endpoint, sw, r)
			return
		}
		defer s.inflight.leave()
		defer s.metrics.countRequest(endpoint, sw, r)
		h(sw, r)
	}
}
