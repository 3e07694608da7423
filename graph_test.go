package gpuarena_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/kernels"
)

// TestCaptureGraphOnTheArena: a graph captured on the arena's buffers is
// replayed by forward steps, outlives Release like a module, is refused
// from inside a step (ErrReentrant), and is listed until DestroyGraph.
func TestCaptureGraphOnTheArena(t *testing.T) {
	ctx := context.Background()
	m, mod := builtManager(t, newSim(t))
	add, err := mod.Function(kernels.ResidualAdd)
	if err != nil {
		t.Fatal(err)
	}
	var hs, res device.DevicePtr
	if _, err := m.Forward(ctx, func(a *device.Arena, _ device.Device) error {
		hs, res = a.Ptr(arena.HiddenStates), a.Ptr(arena.Residual)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const n = 1024
	one := kernels.F32ToBF16(1)
	ones := make([]byte, 2*n)
	for i := range n {
		ones[2*i], ones[2*i+1] = byte(one), byte(one>>8)
	}
	cfg, args := kernels.ResidualAddLaunch(res, hs, hs, n) // residual = 2 · hidden_states
	g, err := m.CaptureGraph(ctx, "double", func(dev device.Device) error { return dev.Launch(add, cfg, args...) })
	if err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 2*n)
	_, err = m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
		if _, err := m.CaptureGraph(ctx, "inner", func(device.Device) error { return nil }); !errors.Is(err, gpuarena.ErrReentrant) {
			t.Errorf("CaptureGraph from a step: got %v, want ErrReentrant", err)
		}
		if err := dev.CopyHtoD(hs, ones); err != nil {
			return err
		}
		if err := dev.LaunchGraph(g); err != nil {
			return err
		}
		return dev.CopyDtoH(back, res) // after the replay: the step stream is a blocking one
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if v := kernels.BF16ToF32(uint16(back[2*i]) | uint16(back[2*i+1])<<8); v != 2 {
			t.Fatalf("residual[%d] = %v after the replay, want 2", i, v)
		}
	}
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := m.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Graphs) != 1 || l.Graphs[0].Name != "double" || l.Graphs[0].Launches != 1 {
		t.Fatalf("ledger graphs after Release: %+v, want the graph", l.Graphs)
	}
	if err := m.DestroyGraph(ctx, "double"); err != nil {
		t.Fatal(err)
	}
	if err := m.DestroyGraph(ctx, "double"); !errors.Is(err, gpuarena.ErrNoGraph) {
		t.Fatalf("second destroy: got %v, want ErrNoGraph", err)
	}
}
