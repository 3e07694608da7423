package gpuworker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// Invariant 1: every backend call runs on one OS thread, not a caller's.
func TestAffinityOneThreadNotTheCallers(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{RecordThreads: true})
	ctx := context.Background()
	var wg sync.WaitGroup
	callers := make(chan int, 64)
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			callers <- gpuworker.ThreadID()
			p, err := w.Alloc(ctx, "t", "x", 8192)
			if err == nil {
				err = w.CopyHtoD(ctx, p, []byte{1, 2, 3})
			}
			if err == nil {
				err = w.Free(ctx, "t", p)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(callers)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	threads := sim.Threads()
	if len(threads) != 1 {
		t.Fatalf("backend calls ran on %d threads (%v), want 1", len(threads), threads)
	}
	var backendTID, calls int
	for tid, n := range threads {
		backendTID, calls = tid, n
	}
	// One MemInfo when the worker starts (its budget), then 3 per goroutine.
	if calls != 1+64*3 {
		t.Fatalf("backend saw %d calls, want %d", calls, 1+64*3)
	}
	for tid := range callers {
		if tid == backendTID {
			t.Fatalf("a caller's thread %d made backend calls", tid)
		}
	}
	st, err := w.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ThreadIDs) != 1 || st.ThreadIDs[0] != backendTID {
		t.Fatalf("dispatcher threads %v, want [%d]", st.ThreadIDs, backendTID)
	}
}

// Invariant 2: one forward at a time; concurrent callers queue.
func TestOneForwardAtATime(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	p := mustAlloc(t, w, "t", 4096)
	var inFlight, peak, steps atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 8 {
				_, err := w.Forward(ctx, func(dev device.Device) error {
					n := inFlight.Add(1)
					defer inFlight.Add(-1)
					for {
						old := peak.Load()
						if n <= old || peak.CompareAndSwap(old, n) {
							break
						}
					}
					runtime.Gosched() // give any other step the chance to overlap
					steps.Add(1)
					return dev.Memset(p, byte(n), 4096)
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if peak.Load() != 1 || steps.Load() != 32*8 {
		t.Fatalf("peak concurrent forwards %d over %d steps, want 1 over %d", peak.Load(), steps.Load(), 32*8)
	}
}

// Invariant 4: a batch that fails at item k leaves the ledger where it was.
func TestAllocBatchRollsBack(t *testing.T) {
	ctx := context.Background()
	for k := 1; k <= 5; k++ {
		t.Run(fmt.Sprint("fail at ", k), func(t *testing.T) {
			w, sim := startFaulty(t, gpuworker.HostSimConfig{}, gpuworker.Faults{FailAllocAt: k + 1})
			keep := mustAlloc(t, w, "other", mib) // alloc call 1
			before, _ := w.Ledger(ctx)
			items := make([]messages.AllocItem, 5)
			for i := range items {
				items[i] = messages.AllocItem{Label: fmt.Sprint("buf", i), Bytes: int64(i+1) * mib}
			}
			ptrs, _, err := w.AllocBatch(ctx, "arena", items, nil)
			var oom *gpuworker.OutOfMemoryError
			if ptrs != nil || !errors.As(err, &oom) || oom.Label != fmt.Sprint("buf", k-1) {
				t.Fatalf("AllocBatch = %v, %v; want an OOM naming buf%d", ptrs, err, k-1)
			}
			after, _ := w.Ledger(ctx)
			if len(after.Entries) != 1 || after.Entries[0].Ptr != keep || after.Counters.CurrentBytes != before.Counters.CurrentBytes {
				t.Fatalf("ledger after rollback: %+v, want only the %d B allocation from before", after.Entries, before.Counters.CurrentBytes)
			}
			if got := sim.BytesInUse(); got != mib {
				t.Fatalf("backend holds %d B after rollback, want %d", got, mib)
			}
			if after.Counters.Failures != 1 {
				t.Fatalf("failures = %d, want 1", after.Counters.Failures)
			}
		})
	}
}

func TestFreeChecksOwnerAndLiveness(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	p := mustAlloc(t, w, "alice", mib)
	if err := w.Free(ctx, "bob", p); !errors.Is(err, gpuworker.ErrNotOwner) {
		t.Fatalf("free by another owner: %v, want ErrNotOwner", err)
	}
	if err := w.Free(ctx, "alice", p+8); !errors.Is(err, gpuworker.ErrNotAllocated) {
		t.Fatalf("free of an interior pointer: %v, want ErrNotAllocated", err)
	}
	if err := w.Free(ctx, "alice", p); err != nil {
		t.Fatal(err)
	}
	if err := w.Free(ctx, "alice", p); !errors.Is(err, gpuworker.ErrNotAllocated) {
		t.Fatalf("double free: %v, want ErrNotAllocated", err)
	}
}

func TestFreeBatchKeepsGoingAndReturnsFirstError(t *testing.T) {
	w, sim := startFaulty(t, gpuworker.HostSimConfig{}, gpuworker.Faults{FailFreeAt: 2})
	ctx := context.Background()
	ptrs := []device.DevicePtr{mustAlloc(t, w, "o", mib), mustAlloc(t, w, "o", mib), mustAlloc(t, w, "o", mib)}
	failed, err := w.FreeBatch(ctx, "o", ptrs)
	if !errors.Is(err, gpuworker.ErrInjected) || !slices.Equal(failed, ptrs[1:2]) {
		t.Fatalf("FreeBatch = %#x, %v; want [%#x] and the injected free failure", failed, err, ptrs[1])
	}
	l, _ := w.Ledger(ctx)
	if len(l.Entries) != 1 || l.Entries[0].Ptr != ptrs[1] || sim.BytesInUse() != mib {
		t.Fatalf("after FreeBatch: ledger %+v, backend %d B; want only the second allocation", l.Entries, sim.BytesInUse())
	}
}

// Invariant 7 (worker part): stopping frees whatever the ledger holds.
func TestStopFreesEverything(t *testing.T) {
	sim, _ := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		mustAlloc(t, w, "o", 5*mib)
	}
	if sim.BytesInUse() != 15*mib {
		t.Fatalf("backend holds %d B, want %d", sim.BytesInUse(), 15*mib)
	}
	w.Stop()
	w.Stop() // idempotent
	if sim.BytesInUse() != 0 {
		t.Fatalf("backend holds %d B after Stop, want 0", sim.BytesInUse())
	}
	if _, err := w.Alloc(context.Background(), "o", "late", mib); !errors.Is(err, gpuworker.ErrClosed) {
		t.Fatalf("Alloc after Stop: %v, want ErrClosed", err)
	}
}

func TestBackendPanicIsFatalAndStopStillFrees(t *testing.T) {
	// Call 1 is the MemInfo of the worker's budget; 2 and 3 the allocations below.
	sim, _ := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	b := gpuworker.WithFaults(sim, gpuworker.Faults{PanicAt: 4})
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { return b, nil }, gpuworker.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mustAlloc(t, w, "o", mib)
	mustAlloc(t, w, "o", mib)
	if _, err := w.Alloc(ctx, "o", "boom", mib); !errors.Is(err, gpuworker.ErrBackendPanic) {
		t.Fatalf("third call: %v, want ErrBackendPanic", err)
	}
	if _, _, err := w.MemInfo(ctx); !errors.Is(err, gpuworker.ErrBackendPanic) {
		t.Fatalf("call after the panic: %v, want ErrBackendPanic", err)
	}
	w.Stop()
	if sim.BytesInUse() != 0 {
		t.Fatalf("backend holds %d B after Stop, want 0", sim.BytesInUse())
	}
}

func TestBudgetFromUtilization(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{TotalBytes: 1000 * mib}, gpuworker.WithGPUMemoryUtilization(0.5))
	if w.Budget() != 500*mib {
		t.Fatalf("budget %d, want %d", w.Budget(), 500*mib)
	}
	mustAlloc(t, w, "o", 400*mib)
	_, err := w.Alloc(context.Background(), "o", "over", 200*mib)
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || !oom.OverBudget || oom.Budget != 500*mib || oom.HeldByOwner["o"] != 400*mib {
		t.Fatalf("got %v, want an over-budget OOM holding 400 MiB of 500", err)
	}
}

func TestCancelledRequestIsNotStarted(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Alloc(ctx, "o", "x", mib); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	l, _ := w.Ledger(context.Background())
	if l.Counters.Allocations != 0 || sim.BytesInUse() != 0 {
		t.Fatalf("a cancelled request allocated: %+v", l.Counters)
	}
}
