package tests

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

var quiet = gpuarena.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

func configPaths(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("../examples/configs/*.json")
	if err != nil || len(paths) < 18 {
		t.Fatalf("found %d configs (%v), want the 18 in examples/configs", len(paths), err)
	}
	return paths
}

// Every config in the repository plans, builds through the actors, runs a
// forward step, and releases to zero, with the ledger and the simulated
// device agreeing at every point (invariant 3).
func TestEveryConfigBuildsAndReleases(t *testing.T) {
	for _, layout := range []device.Layout{device.LayoutPooled, device.LayoutDiscrete} {
		for _, path := range configPaths(t) {
			t.Run(string(layout)+"/"+filepath.Base(path), func(t *testing.T) { buildAndRelease(t, path, layout) })
		}
	}
}

func buildAndRelease(t *testing.T, path string, layout device.Layout) {
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
	m, err := gpuarena.New(quiet, gpuarena.WithArenaLayout(layout), gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return sim, nil }))
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
	buffers := 0
	for _, b := range plan.Buffers {
		if b.Present() {
			buffers++
		}
	}
	// Discrete: one allocation per buffer. Pooled: one pool (its bytes
	// padded to 256 B boundaries) and a view per buffer.
	allocations, views, bytes := buffers+len(plan.Slabs), 0, plan.TotalBytes
	if layout == device.LayoutPooled {
		allocations, views, bytes = 1+len(plan.Slabs), buffers, a.PoolBytes+plan.SlabBytes
	}
	if len(l.Entries) != allocations+views || int(l.Counters.Allocations) != allocations ||
		l.Counters.CurrentBytes != bytes || sim.BytesInUse() != bytes {
		t.Fatalf("ledger %d entries, %d allocations, %d B; device %d B; want %d allocations + %d views, %d B",
			len(l.Entries), l.Counters.Allocations, l.Counters.CurrentBytes, sim.BytesInUse(), allocations, views, bytes)
	}
	if bytes-plan.TotalBytes > plan.BufferBytes/10000 {
		t.Fatalf("the pool pads %d B, more than 0.01%% of %d B", bytes-plan.TotalBytes, plan.BufferBytes)
	}
	for _, e := range l.Entries {
		if e.Owner == "arena" && e.Label != "arena_pool" {
			id := bufferByName(t, e.Label)
			if a.Ptr(id) != e.Ptr || plan.Buffers[id].Bytes != e.Bytes {
				t.Fatalf("ledger entry %+v disagrees with the arena (%#x, %d B)", e, uint64(a.Ptr(id)), plan.Buffers[id].Bytes)
			}
		}
	}
	if _, err := m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
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
	if err != nil || rep.Freed != allocations || rep.Bytes != bytes {
		t.Fatalf("release: %+v, %v; want %d allocations, %d B", rep, err, allocations, bytes)
	}
	if sim.BytesInUse() != 0 {
		t.Fatalf("device holds %d B after release", sim.BytesInUse())
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
