package tests

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// newManager starts a manager on a traced simulated device:
// new-manager [layout=pooled|discrete] [capacity=SIZE].
func (r *scriptRig) newManager(t *testing.T, td *datadriven.TestData) string {
	layout := string(device.LayoutPooled)
	td.MaybeScanArgs(t, "layout", &layout)
	switch device.Layout(layout) {
	case device.LayoutPooled, device.LayoutDiscrete:
	default:
		td.Fatalf(t, "new-manager: unknown layout %q", layout)
	}
	dev := r.start(t, td)
	r.m = simManager(t, dev, gpuarena.WithArenaLayout(device.Layout(layout)))
	return fmt.Sprintf("ok: %s layout, budget %s\n", layout, size(r.m.Budget()))
}

// build builds the arena of a plan: build [plan=small]. The small plan is
// testkit.SmallPlan: hidden_states 1 MiB, logits 3 MiB, norm_unit_w 2 MiB
// (zero-filled) and the slab w of 4 MiB.
func (r *scriptRig) build(t *testing.T, td *datadriven.TestData) string {
	plan := "small"
	td.MaybeScanArgs(t, "plan", &plan)
	if plan != "small" {
		td.Fatalf(t, "build: unknown plan %q", plan)
	}
	_, err := r.m.BuildArena(context.Background(), smallPlan())
	return result(err, "")
}

// scriptSteps are the forward steps a script runs: forward [step=NAME].
var scriptSteps = map[string]func(a *device.Arena, dev device.Device) error{
	// write sets hidden_states to 0x01 and copies the pattern into logits.
	"write": func(a *device.Arena, dev device.Device) error {
		if err := dev.Memset(a.Ptr(arena.HiddenStates), 1, a.Bytes(arena.HiddenStates)); err != nil {
			return err
		}
		return dev.CopyHtoD(a.Ptr(arena.Logits), pattern)
	},
	// noop does nothing.
	"noop": func(*device.Arena, device.Device) error { return nil },
	// panic panics.
	"panic": func(*device.Arena, device.Device) error { panic("a step bug") },
	// goexit ends its goroutine, as t.FailNow in a step would.
	"goexit": func(*device.Arena, device.Device) error { runtime.Goexit(); return nil },
}

// forward runs one forward step: forward [step=write|noop|panic|goexit]
// (write by default).
func (r *scriptRig) forward(t *testing.T, td *datadriven.TestData) string {
	name := "write"
	td.MaybeScanArgs(t, "step", &name)
	step, ok := scriptSteps[name]
	if !ok {
		td.Fatalf(t, "forward: unknown step %q", name)
	}
	_, err := r.m.Forward(context.Background(), step)
	return result(err, "")
}

// carve carves a slab: carve slab=NAME bytes=SIZE; it prints the offset.
func (r *scriptRig) carve(t *testing.T, td *datadriven.TestData) string {
	var slab string
	td.ScanArgs(t, "slab", &slab)
	_, off, err := r.m.CarveSlab(context.Background(), slab, sizeArg(t, td, "bytes"))
	return result(err, fmt.Sprintf("offset %d", off))
}

// release releases the arena; it prints what the report says was freed,
// also when the release failed part way.
func (r *scriptRig) release(*testing.T, *datadriven.TestData) string {
	rep, err := r.m.Release(context.Background())
	freed := fmt.Sprintf("freed %s, %s", plural(rep.Freed, "allocation"), size(rep.Bytes))
	if err != nil {
		return result(err, "") + "report: " + freed + "\n"
	}
	return result(nil, freed)
}
