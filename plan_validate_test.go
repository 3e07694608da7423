package gpuarena_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// A hand-broken plan is refused before anything reaches the device, with the
// same *arena.PlanError under both layouts; the ledger stays empty (nothing
// was ever allocated) and the same manager then builds a good plan.
func TestBuildArenaRefusesInvalidPlans(t *testing.T) {
	const mib = testkit.MiB
	good := func() *arena.Plan { return testkit.SmallPlan("w") }
	tests := []struct {
		name  string
		plan  func() *arena.Plan
		field string // the *arena.PlanError's Field
	}{
		{"negative bytes", func() *arena.Plan {
			p := good()
			p.Buffers[arena.Residual].Bytes = -mib
			p.BufferBytes, p.TotalBytes = 5*mib, 9*mib // the sums agree: only the sign is wrong
			return p
		}, "buffers[residual].bytes"},
		{"absent buffer with bytes", func() *arena.Plan {
			p := good()
			p.Buffers[arena.Residual].Bytes = mib // Absent still says "not in the test plan"
			p.BufferBytes, p.TotalBytes = 7*mib, 11*mib
			return p
		}, "buffers[residual].absent"},
		{"wrong total_bytes", func() *arena.Plan { p := good(); p.TotalBytes = mib; return p }, "total_bytes"},
		{"wrong buffer_bytes", func() *arena.Plan { p := good(); p.BufferBytes = 5 * mib; return p }, "buffer_bytes"},
		{"empty plan, slabs only", func() *arena.Plan {
			p := good()
			for _, id := range []arena.BufferID{arena.HiddenStates, arena.NormUnitW, arena.Logits} {
				p.Buffers[id] = arena.Buffer{ID: id, Absent: "not in the test plan"}
			}
			p.BufferBytes, p.TotalBytes = 0, p.SlabBytes
			return p
		}, "buffers"},
		{"zero plan", func() *arena.Plan { return &arena.Plan{} }, "buffers"},
		{"duplicate slab", func() *arena.Plan {
			p := good()
			p.Slabs = append(p.Slabs, p.Slabs[0])
			p.SlabBytes, p.TotalBytes = 8*mib, 14*mib
			return p
		}, `slabs["w"].name`},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := map[device.Layout]string{}
			for _, layout := range []device.Layout{device.LayoutPooled, device.LayoutDiscrete} {
				m, err := gpuarena.New(quiet, gpuarena.WithArenaLayout(layout),
					gpuarena.WithBackend(gpuworker.BackendConfig{HostSim: gpuworker.HostSimConfig{TotalBytes: 64 * mib}}))
				if err != nil {
					t.Fatal(err)
				}
				_, err = m.BuildArena(ctx, tt.plan())
				var pe *arena.PlanError
				if !errors.Is(err, arena.ErrInvalidPlan) || !errors.Is(err, gpuarena.ErrInvalidValue) || !errors.As(err, &pe) {
					_ = m.Close()
					t.Fatalf("%s: BuildArena = %v, want an *arena.PlanError (ErrInvalidPlan, ErrInvalidValue)", layout, err)
				}
				if pe.Field != tt.field {
					_ = m.Close()
					t.Fatalf("%s: refused field %q, want %q (%v)", layout, pe.Field, tt.field, err)
				}
				msgs[layout] = err.Error()
				l, err := m.Ledger(ctx)
				if err != nil {
					_ = m.Close()
					t.Fatal(err)
				}
				if c := l.Counters; c.CurrentBytes != 0 || c.PeakBytes != 0 || c.Allocations != 0 || c.Failures != 0 || l.BackendBytesInUse != 0 {
					_ = m.Close()
					t.Fatalf("%s: the refused plan reached the device: counters %+v, backend %d B", layout, c, l.BackendBytesInUse)
				}
				if _, err := m.BuildArena(ctx, good()); err != nil {
					_ = m.Close()
					t.Fatalf("%s: good plan after the refusal: %v", layout, err)
				}
				if l, err := m.Ledger(ctx); err != nil || l.Counters.CurrentBytes != 10*mib || l.BackendBytesInUse != 10*mib {
					_ = m.Close()
					t.Fatalf("%s: ledger after the good build: %+v (%v), want 10 MiB", layout, l.Counters, err)
				}
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if msgs[device.LayoutPooled] != msgs[device.LayoutDiscrete] {
				t.Fatalf("the layouts refuse differently:\npooled:   %s\ndiscrete: %s", msgs[device.LayoutPooled], msgs[device.LayoutDiscrete])
			}
		})
	}
}
