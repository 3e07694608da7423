package tests

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// A step that has started is waited for even when its caller's context ends
// first: the step may write the caller's memory (under -race, the write
// after Forward returns would race otherwise). A step whose caller's context
// ends before it starts never runs.
func TestForwardWaitsForAStartedStepOnly(t *testing.T) {
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, sim)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}

	// The step ends its own caller's context, then writes the caller's
	// memory: no clock decides which comes first.
	buf := make([]byte, 64)
	short, stop := context.WithCancel(ctx)
	defer stop()
	_, err := m.Forward(short, func(a *device.Arena, dev device.Device) error {
		stop()
		<-short.Done()
		return dev.CopyDtoH(buf, a.Ptrs[0])
	})
	if err != nil {
		t.Fatalf("a step that outlived its caller's context: %v, want its own result (nil)", err)
	}
	for i := range buf {
		buf[i] = 7 // races with the step's CopyDtoH if Forward returned early
	}

	hang, running := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = m.Forward(ctx, func(*device.Arena, device.Device) error { close(running); <-hang; return nil })
	}()
	<-running
	var ran atomic.Bool
	queued, stopQueued := context.WithTimeout(ctx, 10*time.Millisecond)
	defer stopQueued()
	if _, err := m.Forward(queued, func(*device.Arena, device.Device) error { ran.Store(true); return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a step whose context ended while it was queued: %v, want DeadlineExceeded", err)
	}
	close(hang)
	if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Fatal("a step whose caller gave up before it started ran")
	}
}
