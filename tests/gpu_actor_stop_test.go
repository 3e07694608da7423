package tests

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// escapingBackend is a simulated device whose BytesInUse panics once armed.
// The GPU actor calls BytesInUse outside its backend guard (for a ledger
// snapshot), so the panic escapes the actor's Receive: what a bug in the
// actor's own code would do.
type escapingBackend struct {
	*gpuworker.HostSim
	armed atomic.Bool
}

func (b *escapingBackend) BytesInUse() int64 {
	if b.armed.Load() {
		panic("injected: a panic escaping the GPU actor")
	}
	return b.HostSim.BytesInUse()
}

// A panic escaping the GPU actor stops it — its guardian's directive is stop —
// and it is never restarted (design.md §1): the backend is opened once, the
// ledger's allocations are freed on the GPU thread as it stops, every later
// request fails with ErrClosed joined with ErrActorPanic instead of waiting,
// and Stop still returns.
func TestGPUActorPanicStopsItWithoutRestart(t *testing.T) {
	b := &escapingBackend{HostSim: newSim(t, gpuworker.HostSimConfig{})}
	var opened atomic.Int32
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { opened.Add(1); return b, nil }, gpuworker.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := w.Alloc(ctx, "o", "x", 3*mib); err != nil {
			t.Fatal(err)
		}
	}
	b.armed.Store(true)
	_, err = w.Ledger(ctx)
	if !errors.Is(err, gpuworker.ErrClosed) || !errors.Is(err, gpuworker.ErrActorPanic) {
		t.Fatalf("the request that panicked: %v, want ErrClosed and ErrActorPanic", err)
	}
	if !errors.Is(w.Err(), gpuworker.ErrActorPanic) {
		t.Fatalf("Err() = %v, want ErrActorPanic", w.Err())
	}
	if b.HostSim.BytesInUse() != 0 {
		t.Fatalf("the device holds %d B after the actor stopped, want 0", b.HostSim.BytesInUse())
	}
	if _, err := w.Alloc(ctx, "o", "late", mib); !errors.Is(err, gpuworker.ErrClosed) {
		t.Fatalf("alloc after the actor stopped: %v, want ErrClosed", err)
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("the backend was opened %d times: the GPU actor was restarted", n)
	}
	w.Stop()
	w.Stop()
	if n := opened.Load(); n != 1 {
		t.Fatalf("the backend was opened %d times after Stop", n)
	}
}

// The same through the manager: Err reports the fatal error, requests fail
// with it, and Close still returns with nothing left on the device.
func TestManagerAfterGPUActorPanic(t *testing.T) {
	b := &escapingBackend{HostSim: newSim(t, gpuworker.HostSimConfig{})}
	m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return b, nil }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.BuildArena(ctx, smallPlan()); err != nil {
		t.Fatal(err)
	}
	if m.Err() != nil {
		t.Fatalf("Err() = %v before any failure", m.Err())
	}
	b.armed.Store(true)
	if _, err := m.Ledger(ctx); !errors.Is(err, gpuarena.ErrActorPanic) {
		t.Fatalf("ledger: %v, want ErrActorPanic", err)
	}
	if !errors.Is(m.Err(), gpuarena.ErrActorPanic) {
		t.Fatalf("Err() = %v, want ErrActorPanic", m.Err())
	}
	if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); !errors.Is(err, gpuarena.ErrClosed) || !errors.Is(err, gpuarena.ErrActorPanic) {
		t.Fatalf("forward: %v, want ErrClosed and ErrActorPanic", err)
	}
	err = m.Close()
	if !errors.Is(err, gpuarena.ErrActorPanic) {
		t.Fatalf("Close: %v, want it to report ErrActorPanic", err)
	}
	if err2 := m.Close(); err2 != err {
		t.Fatalf("second Close: %v, want the first's %v", err2, err)
	}
	if b.HostSim.BytesInUse() != 0 {
		t.Fatalf("the device holds %d B after Close", b.HostSim.BytesInUse())
	}
}

// gpuworker.Start spawns the GPU actor under a stop guardian without setting
// that guardian on the actor system's shared root context: actors spawned
// from it afterwards keep protoactor's default supervision.
func TestStartLeavesTheRootContextAlone(t *testing.T) {
	system := newSystem(t)
	w, err := gpuworker.Start(system, gpuworker.BackendConfig{}.Factory(), gpuworker.WithLogger(discard))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if pid := system.Root.Self(); pid != nil {
		t.Fatalf("the root context's sender is %v after Start, want none (no guardian)", pid)
	}
}
