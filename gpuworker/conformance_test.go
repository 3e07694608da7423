package gpuworker_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// runConformance is the backend conformance suite: the same checks, through
// the GPU actor, for every backend (hostsim here, cuda on a GPU machine with
// -tags cuda). The worker has no budget (WithoutBudget), so the backend
// itself refuses what it cannot hold.
func runConformance(t *testing.T, factory gpuworker.BackendFactory) {
	ctx := context.Background()
	w := startWith(t, factory, gpuworker.WithoutBudget())
	const owner = "conformance"

	t.Run("AllocFree", func(t *testing.T) {
		p, err := w.Alloc(ctx, owner, "a", mib)
		if err != nil {
			t.Fatal(err)
		}
		if p == 0 {
			t.Fatal("Alloc returned NULL")
		}
		if err := w.Free(ctx, owner, p); err != nil {
			t.Fatal(err)
		}
		if err := w.Free(ctx, owner, p); !errors.Is(err, gpuworker.ErrNotAllocated) {
			t.Fatalf("double free: got %v, want ErrNotAllocated", err)
		}
	})
	t.Run("ZeroByteRefused", func(t *testing.T) {
		if _, err := w.Alloc(ctx, owner, "zero", 0); !errors.Is(err, gpuworker.ErrInvalidValue) {
			t.Fatalf("got %v, want ErrInvalidValue", err)
		}
	})
	t.Run("OutOfMemoryThenRecovers", func(t *testing.T) {
		_, total, err := w.MemInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Alloc(ctx, owner, "impossible", math.MaxInt64/2)
		var oom *gpuworker.OutOfMemoryError
		if !errors.Is(err, gpuworker.ErrOutOfMemory) || !errors.As(err, &oom) {
			t.Fatalf("got %v, want an *OutOfMemoryError", err)
		}
		if oom.Label != "impossible" || oom.Bytes != math.MaxInt64/2 || oom.DeviceTotal != total {
			t.Fatalf("OutOfMemoryError = %+v: want label impossible, %d B asked, total %d", oom, int64(math.MaxInt64/2), total)
		}
		p, err := w.Alloc(ctx, owner, "after", mib)
		if err != nil {
			t.Fatalf("allocation after an OOM: %v", err)
		}
		if err := w.Free(ctx, owner, p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MemsetReadback", func(t *testing.T) {
		p := mustAlloc(t, w, owner, 3*mib+7)
		if err := w.Memset(ctx, p, 0xA5, 3*mib+7); err != nil {
			t.Fatal(err)
		}
		got, err := w.CopyDtoH(ctx, p, 3*mib+7)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Repeat([]byte{0xA5}, 3*mib+7); !bytes.Equal(got, want) {
			t.Fatal("memset readback differs")
		}
		if err := w.Memset(ctx, p, 0, 3*mib+7); err != nil {
			t.Fatal(err)
		}
		got, _ = w.CopyDtoH(ctx, p, 3*mib+7)
		if !bytes.Equal(got, make([]byte, 3*mib+7)) {
			t.Fatal("zero memset readback is not zero")
		}
	})
	t.Run("CopyHostDeviceHost", func(t *testing.T) {
		pattern := make([]byte, mib)
		for i := range pattern {
			pattern[i] = byte(i*31 + i>>8)
		}
		src := mustAlloc(t, w, owner, mib)
		dst := mustAlloc(t, w, owner, mib)
		if err := w.CopyHtoD(ctx, src, pattern); err != nil {
			t.Fatal(err)
		}
		got, err := w.CopyDtoH(ctx, src, mib)
		if err != nil || !bytes.Equal(got, pattern) {
			t.Fatalf("host→device→host: err %v, equal %v", err, bytes.Equal(got, pattern))
		}
		if err := w.CopyDtoD(ctx, dst, src, mib); err != nil {
			t.Fatal(err)
		}
		got, err = w.CopyDtoH(ctx, dst, mib)
		if err != nil || !bytes.Equal(got, pattern) {
			t.Fatalf("device→device: err %v, equal %v", err, bytes.Equal(got, pattern))
		}
		if err := w.CopyDtoD(ctx, dst+1, src, mib); !errors.Is(err, gpuworker.ErrOutOfRange) {
			t.Fatalf("copy past the end: got %v, want ErrOutOfRange", err)
		}
	})
	t.Run("MemInfo", func(t *testing.T) {
		free0, total, err := w.MemInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if total <= 0 || free0 <= 0 || free0 > total {
			t.Fatalf("MemInfo = free %d total %d", free0, total)
		}
		p := mustAlloc(t, w, owner, 64*mib)
		free1, _, _ := w.MemInfo(ctx)
		// The driver rounds allocations up (2 MiB pages on Hopper); hostsim is exact.
		if d := free0 - free1; d < 64*mib || d > 64*mib+2*mib {
			t.Fatalf("free memory dropped %d B after a 64 MiB allocation", d)
		}
		if err := w.Free(ctx, owner, p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Affinity", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 64 {
			wg.Go(func() {
				p, err := w.Alloc(ctx, owner, "affinity", 4096)
				if err == nil {
					err = w.Memset(ctx, p, 1, 4096)
				}
				if err == nil {
					err = w.Free(ctx, owner, p)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		st, err := w.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.ThreadIDs) != 1 {
			t.Fatalf("GPU actor ran on %d OS threads %v, want 1", len(st.ThreadIDs), st.ThreadIDs)
		}
	})
	// Everything the suite allocated is freed by owner, and the ledger is empty.
	if _, _, err := w.FreeOwner(ctx, owner); err != nil {
		t.Fatal(err)
	}
	l, err := w.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 0 || l.Counters.CurrentBytes != 0 {
		t.Fatalf("ledger after the suite: %d entries, %d B", len(l.Entries), l.Counters.CurrentBytes)
	}
}

func mustAlloc(t *testing.T, w *gpuworker.Worker, owner string, n int64) device.DevicePtr {
	t.Helper()
	p, err := w.Alloc(context.Background(), owner, t.Name(), n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformanceHostSim(t *testing.T) {
	runConformance(t, gpuworker.BackendConfig{Kind: gpuworker.KindHostSim}.Factory())
}
