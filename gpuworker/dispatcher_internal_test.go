package gpuworker

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A scheduled function runs on the pinned thread, after those scheduled
// before it; after Stop none runs.
func TestScheduleRunsOnThePinnedThreadInOrder(t *testing.T) {
	d := NewPinnedDispatcher(0, DefaultSpin)
	type run struct{ i, tid int }
	runs := make(chan run, 3)
	for i := range 3 {
		d.Schedule(func() { runs <- run{i, unix.Gettid()} })
	}
	for want := range 3 {
		r := <-runs
		if r.i != want || int64(r.tid) != d.tid.Load() {
			t.Fatalf("run %d on thread %d; want run %d on the pinned thread %d", r.i, r.tid, want, d.tid.Load())
		}
	}
	d.Stop()
	ran := make(chan struct{}, 1)
	d.Schedule(func() { ran <- struct{}{} })
	select {
	case <-d.exited:
	default:
		t.Fatal("Stop returned before the pinned goroutine exited")
	}
	if len(ran) != 0 {
		t.Fatal("a function scheduled after Stop ran")
	}
}
