package tests

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// hold is a fault plan's OnCall (gpuworker.Faults) that, once armed, blocks the n-th call of one
// operation on the GPU thread until released: a slow call whose start and
// end the test controls, with no sleeping.
type hold struct {
	mu      sync.Mutex
	op      string
	n, seen int
	reached chan struct{} // closed when the held call starts
	release chan struct{} // closed by the test to let it go on
}

func newHold() *hold { return &hold{reached: make(chan struct{}), release: make(chan struct{})} }

// arm holds the n-th call of op from now on.
func (h *hold) arm(op string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.op, h.n, h.seen = op, n, 0
}

// onCall is the fault plan's OnCall.
func (h *hold) onCall(op string, _ int) {
	h.mu.Lock()
	hit := false
	if h.op == op && h.n > 0 {
		h.seen++
		if hit = h.seen == h.n; hit {
			h.n = 0
		}
	}
	h.mu.Unlock()
	if hit {
		close(h.reached)
		<-h.release
	}
}

// holdSim is a simulated device sim and dev, the device wrapped with a hold
// (gpuworker.WithFaults): start the worker on dev, read sim's bytes in use.
func holdSim(t testing.TB) (sim *gpuworker.HostSim, dev gpuworker.Backend, h *hold) {
	h = newHold()
	sim = newSim(t, gpuworker.HostSimConfig{})
	return sim, gpuworker.WithFaults(sim, gpuworker.Faults{OnCall: h.onCall}), h
}

// waitQueued waits until the GPU actor's mailbox holds n messages (the
// requests a test sent while the device is held), failing after 10 s.
func waitQueued(t testing.TB, w *gpuworker.Worker, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.MailboxDepth() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the GPU actor's mailbox holds %d messages, want %d", w.MailboxDepth(), n)
		}
		runtime.Gosched()
	}
}
