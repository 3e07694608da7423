package gpuworker

import (
	"sync"
	"sync/atomic"

	"github.com/gpuarena/gpuarena/device"
)

// workerStatus is what the GPU actor tells its Worker from the GPU thread,
// and what the Worker's callers wait on besides their replies.
type workerStatus struct {
	mu    sync.Mutex
	fatal error
	// gone is closed when no reply is to be waited for any more: once the
	// actor has exited (exit), or once a stop gave up waiting for it
	// (abandon). A caller waiting for a reply then gets ErrClosed.
	gone     chan struct{}
	goneOnce sync.Once
	// abandoned is closed by abandon alone.
	abandoned     chan struct{}
	abandonedOnce sync.Once
	// totals is the ledger's counters and per-owner usage (no entries), as
	// the GPU thread published them after the last request that changed
	// them: what metrics and a stop that gave up read without waiting.
	totals atomic.Pointer[device.Ledger]
}

func newWorkerStatus() *workerStatus {
	s := &workerStatus{gone: make(chan struct{}), abandoned: make(chan struct{})}
	s.totals.Store(&device.Ledger{Owners: map[string]device.OwnerUsage{}})
	return s
}

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

// exit is called by the actor once its Stopped handler has freed what the
// ledger held and closed the backend; abandon by a stop that gives up
// waiting. Both close gone, once.
func (s *workerStatus) exit() { s.goneOnce.Do(func() { close(s.gone) }) }

func (s *workerStatus) abandon() {
	s.abandonedOnce.Do(func() { close(s.abandoned) })
	s.exit()
}
