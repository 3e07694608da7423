package gpuworker

import "sync"

// workerStatus is what the GPU actor tells its Worker from the GPU thread:
// its fatal error, and that it has stopped (exited is closed once its
// Stopped handler has freed what the ledger held and closed the backend), so
// a caller never waits for a reply from an actor that is gone.
type workerStatus struct {
	mu       sync.Mutex
	fatal    error
	exited   chan struct{}
	exitOnce sync.Once
}

func newWorkerStatus() *workerStatus { return &workerStatus{exited: make(chan struct{})} }

// setFatal records err as the fatal error unless one is recorded already.
func (s *workerStatus) setFatal(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal == nil {
		s.fatal = err
	}
}

// err is the fatal error, nil while the actor is healthy.
func (s *workerStatus) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// exit closes exited; it is idempotent.
func (s *workerStatus) exit() { s.exitOnce.Do(func() { close(s.exited) }) }
