package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Backend calls of a manager with the discrete layout on smallPlan, which the
// manager cells below count on:
//
//	1       mem info (the budget, at New)
//	2, 3, 4 alloc hidden_states, logits, norm_unit_w (allocs 1–3)
//	5       alloc slab w (alloc 4)
//	6       memset norm_unit_w to zero (memset 1)
//
// then, per op: a forward step's memset of hidden_states (call 7, memset 2)
// and copy into logits (call 8, copy 1); a release's frees of w, norm_unit_w,
// logits, hidden_states (calls 7–10, frees 1–4).
const callsToBuild = 6

// managerCell is one cell of the manager's fault matrix.
type managerCell struct {
	op, fault string
	faults    gpuworker.Faults
	// built: the arena is built (without error) before the op runs.
	built bool
	run   func(ctx context.Context, m *gpuarena.Manager) error
	want  error // nil: the op succeeds
	held  int64 // bytes the ledger holds after the op
}

func buildOp(ctx context.Context, m *gpuarena.Manager) error {
	_, err := m.BuildArena(ctx, smallPlan())
	return err
}

func carveOp(ctx context.Context, m *gpuarena.Manager) error {
	_, _, err := m.CarveSlab(ctx, "w", 3*mib)
	return err
}

func forwardOp(ctx context.Context, m *gpuarena.Manager) error {
	_, err := m.Forward(ctx, func(a *gpuarena.Arena, dev gpuarena.Device) error {
		if err := dev.Memset(a.Ptr(arena.HiddenStates), 1, a.Bytes(arena.HiddenStates)); err != nil {
			return err
		}
		return dev.CopyHtoD(a.Ptr(arena.Logits), pattern)
	})
	return err
}

func releaseOp(ctx context.Context, m *gpuarena.Manager) error {
	_, err := m.Release(ctx)
	return err
}

// panicThenCarve makes the backend panic in a forward step, then carves.
func panicThenCarve(ctx context.Context, m *gpuarena.Manager) error {
	if err := forwardOp(ctx, m); !errors.Is(err, gpuarena.ErrBackendPanic) {
		return errors.New("the forward step did not panic")
	}
	return carveOp(ctx, m)
}

func managerCells() []managerCell {
	slow := gpuworker.Faults{Delay: 2 * time.Millisecond}
	cells := []managerCell{
		{op: "build", fault: "out of memory, and the rollback's free fails", faults: gpuworker.Faults{FailAllocAt: 2, FailFreeAt: 1}, run: buildOp, want: gpuarena.ErrOutOfMemory},
		{op: "build", fault: "failing zero-fill memset", faults: gpuworker.Faults{FailMemsetAt: 1}, run: buildOp, want: gpuworker.ErrInjected},
		{op: "build", fault: "slow device", faults: slow, run: buildOp, held: 10 * mib},
		{op: "build", fault: "backend panic at the second allocation", faults: gpuworker.Faults{PanicAt: 3}, run: buildOp, want: gpuarena.ErrBackendPanic},
		{op: "build", fault: "backend panic in the zero-fill", faults: gpuworker.Faults{PanicAt: 6}, run: buildOp, want: gpuarena.ErrBackendPanic}, // the batch's rollback frees all

		// A carve makes no backend call: the device's faults cannot hit it,
		// except that after a backend panic nothing is served. Its own
		// out-of-memory is the slab's end.
		{op: "carve", fault: "slab out of memory", built: true, run: func(ctx context.Context, m *gpuarena.Manager) error {
			if err := carveOp(ctx, m); err != nil {
				return err
			}
			return carveOp(ctx, m)
		}, want: gpuarena.ErrSlabExhausted, held: 10 * mib},
		{op: "carve", fault: "slow device", faults: slow, built: true, run: carveOp, held: 10 * mib},
		{op: "carve", fault: "backend panic before it", faults: gpuworker.Faults{PanicAt: callsToBuild + 1}, built: true, run: panicThenCarve, want: gpuarena.ErrBackendPanic, held: 10 * mib},

		{op: "forward", fault: "failing memset", faults: gpuworker.Faults{FailMemsetAt: 2}, built: true, run: forwardOp, want: gpuworker.ErrInjected, held: 10 * mib},
		{op: "forward", fault: "failing copy", faults: gpuworker.Faults{FailCopyAt: 1}, built: true, run: forwardOp, want: gpuworker.ErrInjected, held: 10 * mib},
		{op: "forward", fault: "slow device", faults: slow, built: true, run: forwardOp, held: 10 * mib},
		{op: "forward", fault: "backend panic in the step's memset", faults: gpuworker.Faults{PanicAt: callsToBuild + 1}, built: true, run: forwardOp, want: gpuarena.ErrBackendPanic, held: 10 * mib},
		{op: "forward", fault: "the step itself panics", built: true, run: func(ctx context.Context, m *gpuarena.Manager) error {
			_, err := m.Forward(ctx, func(*gpuarena.Arena, gpuarena.Device) error { panic("a step bug") })
			return err
		}, want: gpuarena.ErrStepPanic, held: 10 * mib},

		// Release walks w (free 1), norm_unit_w (2), logits (3), hidden_states (4).
		{op: "release", fault: "failing free", faults: gpuworker.Faults{FailFreeAt: 2}, built: true, run: releaseOp, want: gpuworker.ErrInjected, held: 2 * mib},
		{op: "release", fault: "slow device", faults: slow, built: true, run: releaseOp, held: 0},
		{op: "release", fault: "backend panic in the second free", faults: gpuworker.Faults{PanicAt: callsToBuild + 2}, built: true, run: releaseOp, want: gpuarena.ErrBackendPanic, held: 6 * mib},
	}
	for k := 1; k <= 4; k++ { // each allocation of the build
		cells = append(cells, managerCell{op: "build", fault: "out of memory at allocation " + string(rune('0'+k)),
			faults: gpuworker.Faults{FailAllocAt: k}, run: buildOp, want: gpuarena.ErrOutOfMemory})
	}
	return cells
}

// The fault matrix of the manager's operations (build arena, carve, forward,
// release). Cells a fault cannot reach are left out: a forward step and a
// release allocate nothing (no out of memory); a build's frees are its
// rollback's (the "rollback's free fails" cell); a carve calls no backend at
// all (its out-of-memory is the slab's end). Each cell checks the typed error, the ledger equal to the device's bytes in use,
// the manager still serving — or, after a backend panic, Err reporting it —
// and Close leaving nothing on the device; TestMain checks for leaked
// goroutines.
func TestManagerFaultMatrix(t *testing.T) {
	for _, c := range managerCells() {
		t.Run(c.op+"/"+c.fault, func(t *testing.T) { runManagerCell(t, c) })
	}
}

func runManagerCell(t *testing.T, c managerCell) {
	ctx := context.Background()
	sim := newSim(t, gpuworker.HostSimConfig{})
	m := simManager(t, gpuworker.WithFaults(sim, c.faults), gpuarena.WithArenaLayout(gpuarena.LayoutDiscrete))
	if c.built {
		if err := buildOp(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	err := c.run(ctx, m)
	took := time.Since(start)
	switch {
	case c.want == nil && err != nil:
		t.Fatalf("%s: %v, want success", c.op, err)
	case c.want != nil && !errors.Is(err, c.want):
		t.Fatalf("%s: %v, want %v", c.op, err, c.want)
	}
	if l := agrees(t, m, sim); l.Counters.CurrentBytes != c.held {
		t.Fatalf("after %s: the ledger holds %d B, want %d B", c.op, l.Counters.CurrentBytes, c.held)
	}
	if c.want == nil && c.faults.Delay > 0 && c.op != "carve" && took < c.faults.Delay {
		t.Fatalf("%s took %v on a device slowed by %v per call", c.op, took, c.faults.Delay)
	}
	panicked := errors.Is(c.want, gpuarena.ErrBackendPanic)
	if panicked {
		if !errors.Is(m.Err(), gpuarena.ErrBackendPanic) {
			t.Fatalf("Err() = %v after a backend panic, want ErrBackendPanic", m.Err())
		}
		if _, _, err := m.MemInfo(ctx); !errors.Is(err, gpuarena.ErrBackendPanic) {
			t.Fatalf("a request after a backend panic: %v, want ErrBackendPanic", err)
		}
	} else {
		if m.Err() != nil {
			t.Fatalf("Err() = %v, want nil", m.Err())
		}
		stillServes(t, m, c)
		agrees(t, m, sim)
	}
	if err := m.Close(); err != nil && !(panicked && errors.Is(err, gpuarena.ErrBackendPanic)) {
		t.Fatalf("Close: %v", err)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("the device holds %d B after Close, want 0", sim.BytesInUse())
	}
}

// stillServes checks that the manager goes on after the cell's fault: what
// the op could not do, it now does.
func stillServes(t *testing.T, m *gpuarena.Manager, c managerCell) {
	t.Helper()
	ctx := context.Background()
	switch {
	case c.op == "build" && c.want != nil:
		if err := buildOp(ctx, m); err != nil {
			t.Fatalf("build after the fault: %v", err)
		}
		if err := forwardOp(ctx, m); err != nil {
			t.Fatalf("forward after the fault: %v", err)
		}
	case c.op == "release":
		rep, err := m.Release(ctx)
		if err != nil || rep.Bytes != c.held {
			t.Fatalf("release again: %+v, %v; want the %d B the first one left", rep, err, c.held)
		}
		if _, err := m.Forward(ctx, func(*gpuarena.Arena, gpuarena.Device) error { return nil }); !errors.Is(err, gpuarena.ErrReleased) {
			t.Fatalf("forward after release: %v, want ErrReleased", err)
		}
	default:
		if err := forwardOp(ctx, m); err != nil {
			t.Fatalf("forward after the fault: %v", err)
		}
		if _, off, err := m.CarveSlab(ctx, "w", 256); err != nil || off%256 != 0 {
			t.Fatalf("carve after the fault: offset %d, %v", off, err)
		}
	}
}
