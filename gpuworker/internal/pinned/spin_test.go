package pinned

import (
	"runtime"
	"testing"
	"time"
)

// Expect wakes a parked goroutine, with no work posted, and the goroutine
// takes up the announcement in its spin; without a spin Expect does
// nothing.
func TestExpectWakesTheGoroutineToSpin(t *testing.T) {
	withProcs(t)
	for _, spin := range []time.Duration{DefaultSpin, 0} {
		d := newDispatcher(0, spin, parkAlwaysInScheduler)
		waitParked(t, d)
		d.Expect()
		if spin == 0 {
			if e := d.expected.Load(); e != 0 || d.parked.Load() != parkedInScheduler {
				t.Fatalf("spin 0: Expect announced %d, parked %d; want nothing announced, still parked", e, d.parked.Load())
			}
			d.Stop()
			continue
		}
		for deadline := time.Now().Add(10 * time.Second); d.expected.Load() != 0; runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatal("the goroutine did not wake up to spin for the announced request")
			}
		}
		d.Stop()
	}
}

// waitParked waits until d's goroutine is parked, failing after 10 s.
func waitParked(t *testing.T, d *Dispatcher) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); d.parked.Load() == notParked; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the goroutine did not park")
		}
	}
}
