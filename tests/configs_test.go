package tests

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

var quiet = gpuarena.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

func configPaths(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("../examples/configs/*.json")
	if err != nil || len(paths) < 14 {
		t.Fatalf("found %d configs (%v), want the 14 in examples/configs", len(paths), err)
	}
	return paths
}

// Every config in the repository plans, builds through the actors, runs a
// forward step, and releases to zero, with the ledger and the simulated
// device agreeing at every point (invariant 3).
func TestEveryConfigBuildsAndReleases(t *testing.T) {
	for _, path := range configPaths(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, err := arena.LoadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 512, FP8Rowwise: true, LoRAMaxRank: 16})
			if err != nil {
				t.Fatal(err)
			}
			sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return sim, nil }))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			a, err := m.BuildArena(ctx, plan)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := m.Ledger(ctx)
			present := len(plan.Slabs)
			for _, b := range plan.Buffers {
				if b.Present() {
					present++
				}
			}
			if len(l.Entries) != present || l.Counters.CurrentBytes != plan.TotalBytes || sim.BytesInUse() != plan.TotalBytes {
				t.Fatalf("ledger %d entries / %d B, device %d B; plan has %d allocations / %d B",
					len(l.Entries), l.Counters.CurrentBytes, sim.BytesInUse(), present, plan.TotalBytes)
			}
			for _, e := range l.Entries {
				if e.Owner == "arena" {
					id := bufferByName(t, e.Label)
					if a.Ptr(id) != e.Ptr || plan.Buffers[id].Bytes != e.Bytes {
						t.Fatalf("ledger entry %+v disagrees with the arena (%#x, %d B)", e, uint64(a.Ptr(id)), plan.Buffers[id].Bytes)
					}
				}
			}
			if _, err := m.Forward(ctx, func(a *gpuarena.Arena, dev gpuarena.Device) error {
				return dev.CopyDtoD(a.Ptr(arena.Residual), a.Ptr(arena.HiddenStates), a.Bytes(arena.HiddenStates))
			}); err != nil {
				t.Fatal(err)
			}
			for _, s := range plan.Slabs {
				if _, _, err := m.CarveSlab(ctx, s.Name, s.Bytes/2); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := m.Release(ctx)
			if err != nil || rep.Freed != present || rep.Bytes != plan.TotalBytes {
				t.Fatalf("release: %+v, %v; want %d allocations, %d B", rep, err, present, plan.TotalBytes)
			}
			if sim.BytesInUse() != 0 {
				t.Fatalf("device holds %d B after release", sim.BytesInUse())
			}
		})
	}
}

func bufferByName(t *testing.T, name string) arena.BufferID {
	t.Helper()
	for _, id := range arena.BufferIDs() {
		if id.String() == name {
			return id
		}
	}
	t.Fatalf("no buffer named %q", name)
	return 0
}
