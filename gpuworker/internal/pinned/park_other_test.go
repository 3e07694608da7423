//go:build !linux

package pinned

import "testing"

// parkModes are the ways the pinned goroutine may park where there is no
// futex(2): always in the scheduler, and by GOMAXPROCS at each park (which
// is the scheduler too).
var parkModes = []parkMode{
	{"scheduler", parkAlwaysInScheduler},
	{"by-gomaxprocs", parkByProcs},
}

// Without futex(2) the goroutine parks in the scheduler whatever GOMAXPROCS
// is.
func TestParkFollowsGOMAXPROCS(t *testing.T) {
	d := newDispatcher(0, 0, parkByProcs)
	defer d.Stop()
	for _, procs := range []int{8, 1} {
		if parksInKernel(t, d, procs) {
			t.Fatalf("GOMAXPROCS %d: parked in the kernel, want the scheduler", procs)
		}
	}
}
