package tests

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// openGroup opens a group over a simulated machine of n H200s, each
// recording the thread of every call, with the small plan's arena built
// on every rank; the test closes it.
func openGroup(t *testing.T, n int) (*gpuarena.Group, *gpuworker.HostSimMachine) {
	t.Helper()
	c, err := gpuworker.ParseMachine("h200")
	if err != nil {
		t.Fatal(err)
	}
	c.Devices[0].RecordThreads = true
	c.Devices = slicesRepeat(c.Devices[0], n)
	mach, err := gpuworker.NewHostSimMachine(c)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(mach.Factories()...), gpuarena.WithRankOptions(quiet))
	if err != nil {
		t.Fatal(err)
	}
	plans := make([]*arena.Plan, n)
	for r := range plans {
		plans[r] = testkit.SmallPlan("w")
	}
	if _, err := g.BuildArenas(context.Background(), plans); err != nil {
		g.Close()
		t.Fatal(err)
	}
	return g, mach
}

func slicesRepeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// Invariant 1 per device: 64 goroutines run group steps and per-rank
// calls; every device's backend calls ran on one OS thread of its own,
// the group's threads are distinct, and none is a caller's.
func TestGroupAffinityPerDevice(t *testing.T) {
	const ranks, callers = 4, 64
	g, mach := openGroup(t, ranks)
	defer g.Close()
	ctx := context.Background()
	tids := make(chan int, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- gpuworker.ThreadID()
			if _, err := g.Forward(ctx, func(_ int, a *device.Arena, dev device.Device) error {
				return dev.CopyHtoD(a.Ptr(arena.HiddenStates), []byte{byte(c), 0, 0, 0})
			}); err != nil {
				t.Error(err)
			}
			if _, _, err := g.Rank(c % ranks).MemInfo(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(tids)
	owner := map[int]int{} // thread → device
	for d := range ranks {
		threads := mach.Device(d).Threads()
		if len(threads) != 1 {
			t.Fatalf("device %d's calls ran on %d threads: %v", d, len(threads), threads)
		}
		for tid := range threads {
			if other, ok := owner[tid]; ok {
				t.Fatalf("devices %d and %d share thread %d", other, d, tid)
			}
			owner[tid] = d
		}
	}
	for tid := range tids {
		if d, ok := owner[tid]; ok {
			t.Fatalf("caller thread %d made device %d's calls", tid, d)
		}
	}
	stats, err := g.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for d, st := range stats {
		if len(st.ThreadIDs) != 1 || owner[st.ThreadIDs[0]] != d {
			t.Errorf("rank %d's GPU actor ran on %v, want its device's one thread", d, st.ThreadIDs)
		}
	}
}
