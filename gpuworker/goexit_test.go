package gpuworker_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// bounded is a context that turns a reply that never comes into a test
// failure instead of a hang.
func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A step that calls runtime.Goexit (what t.FailNow and require.* do) gets
// ErrStepExited; a fresh GPU thread takes over with the ledger intact, the
// worker keeps serving, and Stop frees every byte.
func TestStepGoexitKeepsServingOnANewThread(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{RecordThreads: true})
	ctx := bounded(t)
	p := mustAlloc(t, w, "user", 10*mib)

	_, err := w.Forward(ctx, func(device.Device) error {
		runtime.Goexit()
		return nil
	})
	if !errors.Is(err, gpuworker.ErrStepExited) {
		t.Fatalf("forward of a step that calls runtime.Goexit: %v, want ErrStepExited", err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("Err after a step's Goexit: %v, want nil (the worker keeps serving)", err)
	}
	// The new thread serves steps and backend calls, and the ledger is intact.
	if _, err := w.Forward(ctx, func(d device.Device) error { return d.Memset(p, 7, 10*mib) }); err != nil {
		t.Fatalf("forward after the takeover: %v", err)
	}
	got, err := w.CopyDtoH(ctx, p+device.DevicePtr(10*mib-1), 1)
	if err != nil || got[0] != 7 {
		t.Fatalf("read back after the takeover: %v, %v; want [7]", got, err)
	}
	l, err := w.Ledger(ctx)
	if err != nil || l.Counters.CurrentBytes != 10*mib {
		t.Fatalf("ledger after the takeover: %d B, %v; want %d B", l.Counters.CurrentBytes, err, 10*mib)
	}
	st, err := w.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ThreadIDs) != 2 || st.Takeovers != 1 {
		t.Fatalf("GPU threads %v, takeovers %d; want the first thread and the one that took over, 1 takeover", st.ThreadIDs, st.Takeovers)
	}
	if len(sim.Threads()) != 2 {
		t.Fatalf("backend calls on threads %v; want the two GPU threads", sim.Threads())
	}
	w.Stop()
	if sim.BytesInUse() != 0 {
		t.Fatalf("backend holds %d B after Stop, want 0", sim.BytesInUse())
	}
}

// goexitSim is a simulated device whose Memset calls runtime.Goexit once
// armed: a backend bug that ends the GPU thread.
type goexitSim struct {
	*gpuworker.HostSim
	armed atomic.Bool
}

func (g *goexitSim) Memset(ptr device.DevicePtr, v byte, n int64) error {
	if g.armed.Load() {
		runtime.Goexit()
	}
	return g.HostSim.Memset(ptr, v, n)
}

// A backend that calls runtime.Goexit is treated as one that panicked: the
// request gets ErrBackendPanic, the worker is fatal, later requests get the
// same error, and Stop still frees every byte from the new thread.
func TestBackendGoexitIsFatalAndStopFrees(t *testing.T) {
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g := &goexitSim{HostSim: sim}
	w := startWith(t, func() (gpuworker.Backend, error) { return g, nil })
	ctx := bounded(t)
	p := mustAlloc(t, w, "user", mib)
	g.armed.Store(true)
	for name, call := range map[string]func() error{
		"request": func() error { return w.Memset(ctx, p, 1, mib) },
		"step": func() error {
			_, err := w.Forward(ctx, func(d device.Device) error { return d.Memset(p, 1, mib) })
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, gpuworker.ErrBackendPanic) {
				t.Fatalf("%s whose backend call exits: %v, want ErrBackendPanic", name, err)
			}
		})
	}
	if err := w.Err(); !errors.Is(err, gpuworker.ErrBackendPanic) {
		t.Fatalf("Err: %v, want ErrBackendPanic", err)
	}
	w.Stop()
	if sim.BytesInUse() != 0 {
		t.Fatalf("backend holds %d B after Stop, want 0", sim.BytesInUse())
	}
}

// A backend factory that calls runtime.Goexit fails Start with
// ErrBackendPanic instead of hanging it.
func TestBackendFactoryGoexitFailsStart(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) {
			runtime.Goexit()
			return nil, nil
		}, gpuworker.WithLogger(quiet))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, gpuworker.ErrBackendPanic) {
			t.Fatalf("Start: %v, want ErrBackendPanic", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after the backend factory called runtime.Goexit")
	}
}
