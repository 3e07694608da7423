package actors_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// runningStep builds an arena on a new rig whose arena supervisor signals
// handed each time it hands a step on, and starts a step that runs until
// hold is closed; it returns once that step runs on the GPU thread (and was
// handed on). first gets the step's error.
func runningStep(t *testing.T) (r *rig, handed, hold chan struct{}, first chan error) {
	t.Helper()
	handed = make(chan struct{}, 2)
	r = newRig(t, gpuworker.HostSimConfig{}, nil, actors.WithLogger(quiet), actors.WithHook(func(who string, at actors.Point) {
		if who == "arena" && at == actors.PointForward {
			handed <- struct{}{}
		}
	}))
	ctx := context.Background()
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete); err != nil {
		t.Fatal(err)
	}
	running, hold := make(chan struct{}), make(chan struct{})
	first = make(chan error, 1)
	go func() {
		_, err := r.s.Forward(ctx, func(*device.Arena, device.Device) error { close(running); <-hold; return nil })
		first <- err
	}()
	<-running
	<-handed
	return r, handed, hold, first
}

// The arena supervisor hands a step on without waiting for the one that
// runs: a second step passes it (its hook fires) while the first is still
// running on the GPU thread, and a Release sent then queues behind both at
// the GPU actor, so the second step runs on the arena before it is freed.
func TestForwardQueuesBehindTheRunningStep(t *testing.T) {
	r, handed, hold, first := runningStep(t)
	ctx := context.Background()
	second := make(chan error, 1)
	var order []string // appended on the GPU thread only, read after both replies
	go func() {
		_, err := r.s.Forward(ctx, func(a *device.Arena, dev device.Device) error {
			order = append(order, "second")
			return dev.Memset(a.Ptr(arena.Logits), 7, a.Bytes(arena.Logits))
		})
		second <- err
	}()
	<-handed // the second step is past the supervisor while the first runs
	released := make(chan error, 1)
	go func() {
		rep, err := r.s.Release(ctx)
		if err == nil && rep.Bytes != 10*mib {
			err = errors.New("the release freed less than the arena")
		}
		released <- err
	}()
	close(hold)
	if err := <-first; err != nil {
		t.Fatalf("first step: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second step, queued before the release: %v", err)
	}
	if err := <-released; err != nil {
		t.Fatalf("release: %v", err)
	}
	if len(order) != 1 {
		t.Fatalf("the second step ran %d times", len(order))
	}
	if _, err := r.s.Forward(ctx, noStep); !errors.Is(err, actors.ErrReleased) {
		t.Fatalf("a step after the release: %v, want ErrReleased", err)
	}
	r.agrees(t, 0)
}

// A step queued at the GPU actor when the supervisors start to drain does
// not start: its caller gets ErrClosed, and the step that ran is answered.
func TestDrainRefusesQueuedStep(t *testing.T) {
	r, handed, hold, first := runningStep(t)
	ctx := context.Background()
	second := make(chan error, 1)
	ran := false
	go func() {
		_, err := r.s.Forward(ctx, func(*device.Arena, device.Device) error { ran = true; return nil })
		second <- err
	}()
	<-handed
	r.s.Drain()
	close(hold)
	if err := <-first; err != nil {
		t.Fatalf("the running step: %v", err)
	}
	if err := <-second; !errors.Is(err, gpuworker.ErrClosed) || ran {
		t.Fatalf("the queued step: ran %v, %v; want it refused with ErrClosed", ran, err)
	}
	if _, err := r.s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r.agrees(t, 0)
}
