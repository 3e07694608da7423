package gpuworker_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/kernels"
)

// graphRig is a simulated device with the kernels loaded and a 2048-element
// BF16 buffer p of ones that residual_add_bf16 doubles in place.
type graphRig struct {
	w    *gpuworker.Worker
	sim  *gpuworker.HostSim
	add  device.Function
	p    device.DevicePtr
	cfg  device.LaunchConfig
	args []uint64
}

const graphElems = 2048

func newGraphRig(t *testing.T) *graphRig {
	w, sim := startSim(t, gpuworker.HostSimConfig{RecordThreads: true})
	r := &graphRig{w: w, sim: sim, add: mustFunction(t, mustLoad(t, w, "k", kernels.PTX), kernels.ResidualAdd)}
	r.p = mustAlloc(t, w, "g", 2*graphElems)
	r.cfg, r.args = kernels.ResidualAddLaunch(r.p, r.p, r.p, graphElems)
	ones := make([]uint16, graphElems)
	for i := range ones {
		ones[i] = kernels.F32ToBF16(1)
	}
	if err := w.CopyHtoD(context.Background(), r.p, bf16Bytes(ones)); err != nil {
		t.Fatal(err)
	}
	return r
}

// doublings captures n doublings of p.
func (r *graphRig) doublings(n int) func(device.Device) error {
	return func(dev device.Device) error {
		for range n {
			if err := dev.Launch(r.add, r.cfg, r.args...); err != nil {
				return err
			}
		}
		return nil
	}
}

// value is p's first element, checked to be every element's.
func (r *graphRig) value(t *testing.T) float32 {
	t.Helper()
	v := bf16Values(mustRead(t, r.w, r.p, 2*graphElems))
	for i, h := range v {
		if h != v[0] {
			t.Fatalf("element %d is %v, element 0 %v", i, kernels.BF16ToF32(h), kernels.BF16ToF32(v[0]))
		}
	}
	return kernels.BF16ToF32(v[0])
}

// TestGraphCaptureRunsNothing: a capture records the launches without
// running them; each replay runs all of them, in order, on the GPU thread.
func TestGraphCaptureRunsNothing(t *testing.T) {
	r := newGraphRig(t)
	ctx := context.Background()
	g, err := r.w.CaptureGraph(ctx, "x8", r.doublings(3))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.value(t); got != 1 {
		t.Fatalf("after the capture p is %v, want 1 (a capture runs nothing)", got)
	}
	var wg sync.WaitGroup
	for range 4 { // from several goroutines: 1 · 8⁴
		wg.Go(func() {
			if _, err := r.w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(g) }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := r.value(t); got != 4096 {
		t.Fatalf("after four replays of three doublings p is %v, want 4096", got)
	}
	if th := r.sim.Threads(); len(th) != 1 {
		t.Fatalf("the device was called from %d threads: %v", len(th), th)
	}
}

// TestGraphCaptureEnds: a capture that panics, calls runtime.Goexit or
// fails leaves no graph and the stream out of capture mode, so the next
// capture and steps work; its Device is dead after it.
func TestGraphCaptureEnds(t *testing.T) {
	r := newGraphRig(t)
	ctx := bounded(t)
	_, err := r.w.CaptureGraph(ctx, "panics", func(dev device.Device) error {
		_ = r.doublings(1)(dev)
		panic("in a capture")
	})
	if !errors.Is(err, gpuworker.ErrStepPanic) {
		t.Errorf("a capture that panics: got %v, want ErrStepPanic", err)
	}
	_, err = r.w.CaptureGraph(ctx, "exits", func(dev device.Device) error {
		_ = r.doublings(1)(dev)
		runtime.Goexit()
		return nil
	})
	if !errors.Is(err, gpuworker.ErrStepExited) {
		t.Errorf("a capture that calls runtime.Goexit: got %v, want ErrStepExited", err)
	}
	var kept device.Device
	g, err := r.w.CaptureGraph(ctx, "after", func(dev device.Device) error {
		kept = dev
		return r.doublings(1)(dev)
	})
	if err != nil || g.Launches != 1 {
		t.Fatalf("a capture after the failed ones: %+v, %v; want 1 launch", g, err)
	}
	if err := kept.Launch(r.add, r.cfg, r.args...); !errors.Is(err, gpuworker.ErrStepOver) {
		t.Errorf("a launch on a capture's Device after it: got %v, want ErrStepOver", err)
	}
	if err := kept.Memset(r.p, 0, 2); !errors.Is(err, gpuworker.ErrStepOver) {
		t.Errorf("a memset on a capture's Device after it: got %v, want ErrStepOver", err)
	}
	if _, err := r.w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(g) }); err != nil {
		t.Fatal(err)
	}
	if got := r.value(t); got != 2 {
		t.Fatalf("p is %v after one replay of one doubling, want 2 (the failed captures ran nothing)", got)
	}
	l, err := r.w.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Graphs) != 1 || l.Graphs[0].Name != "after" || l.Graphs[0].Launches != 1 {
		t.Fatalf("ledger graphs %+v, want only %q", l.Graphs, "after")
	}
	if err := r.w.Err(); err != nil {
		t.Fatalf("the worker is fatal: %v", err)
	}
}

// TestGraphOfAnotherWorker: a Graph is valid only on the worker that
// captured it, and not after DestroyGraph.
func TestGraphOfAnotherWorker(t *testing.T) {
	r1, r2 := newGraphRig(t), newGraphRig(t)
	ctx := context.Background()
	g, err := r1.w.CaptureGraph(ctx, "g", r1.doublings(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.w.CaptureGraph(ctx, "g", r2.doublings(1)); err != nil {
		t.Fatal(err) // one name on two workers is two graphs
	}
	_, err = r2.w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(g) })
	var ge *device.GraphError
	if !errors.Is(err, gpuworker.ErrNoGraph) || !errors.As(err, &ge) || ge.Graph != "g" || ge.Op != "launch graph" {
		t.Errorf("another worker's graph: got %v, want ErrNoGraph naming it", err)
	}
	if err := r1.w.DestroyGraph(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(g) }); !errors.Is(err, gpuworker.ErrNoGraph) {
		t.Errorf("a destroyed graph: got %v, want ErrNoGraph", err)
	}
	if got := r1.value(t); got != 1 {
		t.Fatalf("p is %v, want 1: no replay ran", got)
	}
}

// TestGraphThroughFaults: a fault plan forwards graphs as it forwards
// launches.
func TestGraphThroughFaults(t *testing.T) {
	w, _ := startFaulty(t, gpuworker.HostSimConfig{}, gpuworker.Faults{FailCopyAt: 100})
	ctx := context.Background()
	add := mustFunction(t, mustLoad(t, w, "k", kernels.PTX), kernels.ResidualAdd)
	p := mustAlloc(t, w, "g", 64)
	cfg, args := kernels.ResidualAddLaunch(p, p, p, 32)
	g, err := w.CaptureGraph(ctx, "g", func(dev device.Device) error { return dev.Launch(add, cfg, args...) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(g) }); err != nil {
		t.Fatal(err)
	}
}
