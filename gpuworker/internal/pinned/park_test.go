package pinned

import (
	"runtime"
	"testing"
	"time"
)

// parksInKernel sets GOMAXPROCS to procs (restored when the test ends), has
// d do one function, waits for it to park again and reports whether that
// park was in the kernel; it also checks that the goroutine recorded procs
// for polls.
func parksInKernel(t *testing.T, d *Dispatcher, procs int) bool {
	t.Helper()
	prev := runtime.GOMAXPROCS(procs)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	<-ran
	for deadline := time.Now().Add(10 * time.Second); !d.idle.Load() || d.parked.Load() == notParked; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS %d: the goroutine did not park again", procs)
		}
	}
	if got := d.procs.Load(); got != int32(procs) {
		t.Fatalf("the goroutine read GOMAXPROCS %d at its park, want %d", got, procs)
	}
	return d.inKernel.Load()
}
