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
)

// Invariant 1 through the whole stack: 64 goroutines run forward steps through
// the manager; every backend call ran on one OS thread, none of the callers'.
func TestManagerAffinity(t *testing.T) {
	sim, _ := gpuworker.NewHostSim(gpuworker.HostSimConfig{RecordThreads: true})
	m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return sim, nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg, err := arena.LoadConfig("../examples/configs/qwen3-next-80b-a3b-thinking.json")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.BuildArena(ctx, plan); err != nil {
		t.Fatal(err)
	}
	callers := make(chan int, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			callers <- gpuworker.ThreadID()
			_, err := m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
				return dev.CopyHtoD(a.Ptr(arena.TokenIDs), []byte{1, 0, 0, 0})
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(callers)
	threads := sim.Threads()
	if len(threads) != 1 {
		t.Fatalf("backend calls ran on %d OS threads: %v", len(threads), threads)
	}
	for tid := range callers {
		if _, ok := threads[tid]; ok {
			t.Fatalf("caller thread %d made a backend call", tid)
		}
	}
	st, _ := m.Stats(ctx)
	if len(st.ThreadIDs) != 1 {
		t.Fatalf("GPU actor ran on threads %v, want one", st.ThreadIDs)
	}
}
