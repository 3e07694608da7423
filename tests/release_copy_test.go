package tests

import (
	"context"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// The Arena a caller gets is a copy: a caller or a step that writes into it
// (against its doc) cannot make Release miss an allocation.
func TestReleaseIgnoresChangesToTheSharedArena(t *testing.T) {
	for _, layout := range []device.Layout{device.LayoutPooled, device.LayoutDiscrete} {
		t.Run(string(layout), func(t *testing.T) {
			sim := newSim(t, gpuworker.HostSimConfig{})
			m := simManager(t, sim, gpuarena.WithArenaLayout(layout))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a, err := m.BuildArena(ctx, smallPlan())
			if err != nil {
				t.Fatal(err)
			}
			a.Ptrs[arena.Logits] = 0
			a.Ptrs[arena.HiddenStates] = a.Ptrs[arena.NormUnitW]
			a.Pool = 0
			a.Slabs = nil
			if _, err := m.Forward(ctx, func(sa *device.Arena, _ device.Device) error {
				if sa != a {
					t.Error("the step got another Arena than the caller")
				}
				sa.Ptrs[arena.NormUnitW] = 0
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			agrees(t, m, sim)
			if sim.BytesInUse() != 0 {
				t.Fatalf("device holds %d B after Release, want 0", sim.BytesInUse())
			}
		})
	}
}
