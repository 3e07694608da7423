package gpuworker_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// A step's Device used from other goroutines while the step runs gets
// ErrNotGPUThread and never reaches the backend (invariant 1); used after
// the step it gets ErrStepOver. Under -race this also shows the handle's
// state is read and written without a data race.
func TestDeviceIsTiedToTheStepsThread(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{RecordThreads: true})
	ctx := bounded(t)
	p := mustAlloc(t, w, "user", mib)
	before := sim.Threads()

	var kept device.Device
	var offThread []error
	_, err := w.Forward(ctx, func(d device.Device) error {
		kept = d
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = d.Memset(p, byte(i), mib) })
		}
		wg.Wait()
		offThread = errs
		return d.Memset(p, 9, mib) // the step's own goroutine may
	})
	if err != nil {
		t.Fatalf("step: %v", err)
	}
	for i, err := range offThread {
		if !errors.Is(err, gpuworker.ErrNotGPUThread) {
			t.Fatalf("goroutine %d's memset from inside the step: %v, want ErrNotGPUThread", i, err)
		}
	}
	after := sim.Threads()
	if len(after) != 1 {
		t.Fatalf("backend calls ran on threads %v, want one", after)
	}
	for tid, n := range after {
		if n != before[tid]+1 {
			t.Fatalf("the step made %d backend calls, want 1 (the step's own memset)", n-before[tid])
		}
	}
	done := make(chan error, 1)
	go func() { done <- kept.Memset(p, 1, 1) }()
	if err := <-done; !errors.Is(err, gpuworker.ErrStepOver) {
		t.Fatalf("memset after the step, from another goroutine: %v, want ErrStepOver", err)
	}
	got, err := w.CopyDtoH(ctx, p, 1)
	if err != nil || got[0] != 9 {
		t.Fatalf("device byte: %v, %v; want [9] (only the step's own memset ran)", got, err)
	}
}

// spySim counts the memsets that reach the simulated device.
type spySim struct {
	*gpuworker.HostSim
	memsets atomic.Int64
}

func (s *spySim) Memset(ptr device.DevicePtr, v byte, n int64) error {
	s.memsets.Add(1)
	return s.HostSim.Memset(ptr, v, n)
}

// A pointer 2⁶³ or more past an allocation (a negative offset when read as
// int64) is no live allocation: it never reaches the backend. Overlapping
// device-to-device copies, undefined on the driver, are refused.
func TestDeviceRefusesWildPointersAndOverlaps(t *testing.T) {
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	spy := &spySim{HostSim: sim}
	w := startWith(t, func() (gpuworker.Backend, error) { return spy, nil })
	ctx := bounded(t)
	p := mustAlloc(t, w, "user", mib)
	_, err = w.Forward(ctx, func(d device.Device) error {
		for _, wild := range []device.DevicePtr{p + 1<<63, 0xFFFF_0000_0000_0000, ^device.DevicePtr(0) - 15} {
			if err := d.Memset(wild, 0, 16); !errors.Is(err, gpuworker.ErrNotAllocated) {
				t.Errorf("memset at %#x: %v, want ErrNotAllocated", uint64(wild), err)
			}
		}
		if err := d.CopyDtoD(p+256, p, 4096); !errors.Is(err, gpuworker.ErrInvalidValue) {
			t.Errorf("overlapping copy: %v, want ErrInvalidValue", err)
		}
		return d.CopyDtoD(p+4096, p, 4096) // adjacent, not overlapping
	})
	if err != nil {
		t.Fatalf("step: %v", err)
	}
	if n := spy.memsets.Load(); n != 0 {
		t.Fatalf("%d memsets at wild pointers reached the backend, want 0", n)
	}
}
