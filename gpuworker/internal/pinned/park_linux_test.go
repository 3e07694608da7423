package pinned

import "testing"

// parkModes are the ways the pinned goroutine may park on Linux: always in
// the scheduler, always in futex(2), and by GOMAXPROCS at each park.
var parkModes = []parkMode{
	{"scheduler", parkAlwaysInScheduler},
	{"futex", parkAlwaysInKernel},
	{"by-gomaxprocs", parkByProcs},
}

// On Linux the goroutine parks in futex(2) from parkInKernelFromProcs Ps and
// in the scheduler below, as GOMAXPROCS reads at each park.
func TestParkFollowsGOMAXPROCS(t *testing.T) {
	d := newDispatcher(0, 0, parkByProcs)
	defer d.Stop()
	for _, c := range []struct {
		procs    int
		inKernel bool
	}{{parkInKernelFromProcs, true}, {1, false}, {parkInKernelFromProcs + 4, true}} {
		if got := parksInKernel(t, d, c.procs); got != c.inKernel {
			t.Fatalf("GOMAXPROCS %d: parked in futex(2) %v, want %v", c.procs, got, c.inKernel)
		}
	}
}
