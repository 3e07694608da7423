package gpuworker_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/kernels"
)

// conformanceGraph is the graph runGraphConformance captures and keeps,
// for the check after the module's unload.
const conformanceGraph = "rmsnorm+residual"

// runGraphConformance is the graph half of the compute conformance suite:
// RMSNorm then the residual add, captured once into a graph, replayed on
// new inputs, and compared byte for byte with the same launches made one
// by one; then what a capture refuses and what a failed one leaves. It
// returns the graph, kept for checkGraphAfterUnload.
func runGraphConformance(t *testing.T, w *gpuworker.Worker, rms, add device.Function, owner string) device.Graph {
	ctx := context.Background()
	const rows, cols, eps = 5, 1024, 1e-6
	n := int64(rows * cols)
	xp, wp := mustAlloc(t, w, owner, 2*n), mustAlloc(t, w, owner, 2*cols)
	outp, sump := mustAlloc(t, w, owner, 2*n), mustAlloc(t, w, owner, 2*n)
	rng := rand.New(rand.NewPCG(7, 7))
	random := func(k int64, scale float64) []byte {
		v := make([]uint16, k)
		for i := range v {
			v[i] = kernels.F32ToBF16(float32(rng.NormFloat64() * scale))
		}
		return bf16Bytes(v)
	}
	if err := w.CopyHtoD(ctx, wp, random(cols, 0.2)); err != nil {
		t.Fatal(err)
	}
	launches := func(dev device.Device) error {
		cfg, args := kernels.RMSNormLaunch(outp, xp, wp, rows, cols, eps, true)
		if err := dev.Launch(rms, cfg, args...); err != nil {
			return err
		}
		cfg, args = kernels.ResidualAddLaunch(sump, xp, outp, uint64(n))
		return dev.Launch(add, cfg, args...)
	}
	before := ledgerGraphs(t, w)
	g, err := w.CaptureGraph(ctx, conformanceGraph, launches)
	if err != nil {
		t.Fatal(err)
	}
	if g.Launches != 2 || g.Name != conformanceGraph {
		t.Fatalf("captured %+v, want 2 launches named %q", g, conformanceGraph)
	}
	if got := ledgerGraphs(t, w); len(got) != len(before)+1 || got[len(got)-1].Name != conformanceGraph ||
		len(got[len(got)-1].Modules) != 1 || got[len(got)-1].Modules[0] != kernels.ModuleName {
		t.Fatalf("ledger graphs after the capture: %+v", got)
	}
	// Replay and direct launches on the same new inputs, three times.
	for round := range 3 {
		x := random(n, 4)
		run := func(step func(device.Device) error) (out, sum []byte) {
			if err := w.CopyHtoD(ctx, xp, x); err != nil {
				t.Fatal(err)
			}
			if err := w.Memset(ctx, outp, 0, 2*n); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Forward(ctx, step); err != nil {
				t.Fatal(err)
			}
			out, err := w.CopyDtoH(ctx, outp, 2*n)
			if err != nil {
				t.Fatal(err)
			}
			sum, err = w.CopyDtoH(ctx, sump, 2*n)
			if err != nil {
				t.Fatal(err)
			}
			return out, sum
		}
		dOut, dSum := run(launches)
		gOut, gSum := run(func(dev device.Device) error { return dev.LaunchGraph(g) })
		if !bytes.Equal(dOut, gOut) || !bytes.Equal(dSum, gSum) {
			t.Fatalf("round %d: the replayed graph's norm_output or residual differs from the direct launches'", round)
		}
		want := make([]uint16, n)
		kernels.RMSNormBF16(want, bf16Values(x), bf16Values(mustRead(t, w, wp, 2*cols)), rows, cols, eps, true)
		checkULPs(t, "rmsnorm_bf16 replayed", bf16Values(gOut), want, kernels.RMSNormULPs(true))
	}

	t.Run("Refused", func(t *testing.T) {
		calls := map[string]func(dev device.Device) error{
			"memset":      func(dev device.Device) error { return dev.Memset(outp, 0, 2) },
			"copy h→d":    func(dev device.Device) error { return dev.CopyHtoD(outp, []byte{0, 0}) },
			"copy d→h":    func(dev device.Device) error { return dev.CopyDtoH(make([]byte, 2), outp) },
			"copy d→d":    func(dev device.Device) error { return dev.CopyDtoD(outp, sump, 2) },
			"async h→d":   func(dev device.Device) error { return dev.CopyHtoDAsync(outp, []byte{0, 0}) },
			"async d→h":   func(dev device.Device) error { return dev.CopyDtoHAsync(make([]byte, 2), outp) },
			"event":       func(dev device.Device) error { _, err := dev.RecordEvent(); return err },
			"elapsed":     func(dev device.Device) error { _, err := dev.Elapsed(device.Event{}, device.Event{}); return err },
			"synchronize": func(dev device.Device) error { return dev.Synchronize() },
			"graph":       func(dev device.Device) error { return dev.LaunchGraph(g) },
		}
		for what, call := range calls {
			// The refused call leaves the capture going: the launches
			// around it are captured and the graph is kept.
			var refused error
			rg, err := w.CaptureGraph(ctx, "refused-"+what, func(dev device.Device) error {
				cfg, args := kernels.ResidualAddLaunch(sump, xp, outp, uint64(n))
				if err := dev.Launch(add, cfg, args...); err != nil {
					return err
				}
				refused = call(dev)
				return dev.Launch(add, cfg, args...)
			})
			if !errors.Is(refused, gpuworker.ErrNotCapturable) {
				t.Errorf("%s during a capture: got %v, want ErrNotCapturable", what, refused)
			}
			if err != nil || rg.Launches != 2 {
				t.Errorf("%s: the capture after the refusal: %+v, %v; want 2 launches", what, rg, err)
				continue
			}
			if err := w.DestroyGraph(ctx, rg.Name); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("FailedCaptureLeavesNothing", func(t *testing.T) {
		boom := errors.New("the step's own error")
		before := ledgerGraphs(t, w)
		_, err := w.CaptureGraph(ctx, "failing", func(dev device.Device) error {
			if err := launches(dev); err != nil {
				return err
			}
			return boom
		})
		var ge *device.GraphError
		if !errors.Is(err, boom) || !errors.As(err, &ge) || ge.Graph != "failing" {
			t.Errorf("capture whose function fails: got %v, want its error in a GraphError naming the graph", err)
		}
		_, err = w.CaptureGraph(ctx, "bad-launch", func(dev device.Device) error {
			_ = dev.Launch(add, device.LaunchConfig{Grid: device.Dim3{X: 1}, Block: device.Dim3{X: 2048}}, make([]uint64, 4)...)
			return nil // the failed launch fails the capture all the same
		})
		if !errors.Is(err, gpuworker.ErrLaunchConfig) {
			t.Errorf("capture with a refused launch: got %v, want ErrLaunchConfig", err)
		}
		if got := ledgerGraphs(t, w); len(got) != len(before) {
			t.Errorf("graphs after failed captures: %+v, want %+v", got, before)
		}
		// The step stream is out of capture mode: a step's launches run.
		if _, err := w.Forward(ctx, launches); err != nil {
			t.Fatalf("a step after failed captures: %v", err)
		}
		if err := w.DestroyGraph(ctx, "failing"); !errors.Is(err, gpuworker.ErrNoGraph) {
			t.Errorf("destroy a graph never kept: got %v, want ErrNoGraph", err)
		}
	})
	t.Run("Names", func(t *testing.T) {
		if _, err := w.CaptureGraph(ctx, conformanceGraph, launches); !errors.Is(err, gpuworker.ErrInvalidValue) {
			t.Errorf("a second graph of one name: got %v, want ErrInvalidValue", err)
		}
		if _, err := w.CaptureGraph(ctx, "", launches); !errors.Is(err, gpuworker.ErrInvalidValue) {
			t.Errorf("an empty name: got %v, want ErrInvalidValue", err)
		}
	})
	return g
}

// checkGraphAfterUnload replays g after its module was unloaded: refused
// with ErrNoModule naming the module, before anything reaches the device;
// a Graph value that names no held graph is ErrNoGraph.
func checkGraphAfterUnload(t *testing.T, w *gpuworker.Worker, g device.Graph) {
	ctx := context.Background()
	_, err := w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(g) })
	var ke *device.KernelError
	if !errors.Is(err, gpuworker.ErrNoModule) || !errors.As(err, &ke) || ke.Module != kernels.ModuleName {
		t.Errorf("replay after the module's unload: got %v, want ErrNoModule naming %q", err, kernels.ModuleName)
	}
	_, err = w.Forward(ctx, func(dev device.Device) error { return dev.LaunchGraph(device.Graph{Name: g.Name}) })
	if !errors.Is(err, gpuworker.ErrNoGraph) {
		t.Errorf("a Graph value of no held graph: got %v, want ErrNoGraph", err)
	}
	if err := w.DestroyGraph(ctx, g.Name); err != nil {
		t.Fatal(err)
	}
	if got := ledgerGraphs(t, w); len(got) != 0 {
		t.Errorf("graphs after the last was destroyed: %+v", got)
	}
}

func ledgerGraphs(t *testing.T, w *gpuworker.Worker) []device.GraphEntry {
	t.Helper()
	l, err := w.Ledger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l.Graphs
}

func mustRead(t *testing.T, w *gpuworker.Worker, p device.DevicePtr, n int64) []byte {
	t.Helper()
	b, err := w.CopyDtoH(context.Background(), p, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
