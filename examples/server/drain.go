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

// generating wraps a generation endpoint: counted in flight, or refused
// with 503 while the server drains.
func (s *server) generating(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.inflight.enter() {
			w.Header().Set("Retry-After", "1")
			s.fail(w, endpoint, &requestError{status: http.StatusServiceUnavailable, msg: "the server is shutting down: send the request to another replica"})
			return
		}
		defer s.inflight.leave()
		h(w, r)
	}
}
