package gpuworker

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// parkModes are the two ways the pinned goroutine parks.
var parkModes = []bool{false, true}

func parkMode(kernel bool) string {
	if kernel {
		return "futex"
	}
	return "scheduler"
}

// A scheduled function runs on the pinned thread, after those scheduled
// before it; after Stop none runs.
func TestScheduleRunsOnThePinnedThreadInOrder(t *testing.T) {
	for _, kernel := range parkModes {
		t.Run(parkMode(kernel), func(t *testing.T) {
			d := newPinnedDispatcher(0, DefaultSpin, kernel)
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
		})
	}
}

// Work queued while the goroutine parks, or just before, always wakes it:
// many rounds of park and wake-up, each waited for, lose none, with no spin
// (the goroutine parks after every function) and with one. Stop wakes a
// parked goroutine.
func TestParkedGoroutineIsWokenForEveryFunction(t *testing.T) {
	for _, kernel := range parkModes {
		for _, spin := range []time.Duration{0, DefaultSpin} {
			t.Run(fmt.Sprintf("%s/spin=%v", parkMode(kernel), spin), func(t *testing.T) {
				d := newPinnedDispatcher(0, spin, kernel)
				done := make(chan int)
				for i := range 2000 {
					d.Schedule(func() { done <- i })
					if got := <-done; got != i {
						t.Fatalf("round %d ran function %d", i, got)
					}
					if i%100 == 0 {
						time.Sleep(100 * time.Microsecond) // let it park
					}
				}
				time.Sleep(time.Millisecond)
				d.Stop()
				if d.parked.Load() != 0 {
					t.Fatalf("parked = %d after Stop, want 0", d.parked.Load())
				}
			})
		}
	}
}
