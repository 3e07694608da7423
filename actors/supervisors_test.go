package actors_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// The build zero-fills norm_unit_w, and only it, in both layouts.
func TestBuildArenaZeroFillsNormUnitWOnly(t *testing.T) {
	for _, layout := range []device.Layout{device.LayoutDiscrete, device.LayoutPooled} {
		r := newRig(t, gpuworker.HostSimConfig{}, func(h *gpuworker.HostSim) gpuworker.Backend { return dirtyAlloc{h} })
		ctx := context.Background()
		a, err := r.s.BuildArena(ctx, testPlan(), layout)
		if err != nil {
			t.Fatal(err)
		}
		norm, err := r.w.CopyDtoH(ctx, a.Ptr(arena.NormUnitW), a.Bytes(arena.NormUnitW))
		if err != nil || !bytes.Equal(norm, make([]byte, len(norm))) {
			t.Fatalf("%s: norm_unit_w is not zero-filled (err %v)", layout, err)
		}
		hidden, err := r.w.CopyDtoH(ctx, a.Ptr(arena.HiddenStates), a.Bytes(arena.HiddenStates))
		if err != nil || !bytes.Equal(hidden, bytes.Repeat([]byte{0xFF}, len(hidden))) {
			t.Fatalf("%s: hidden_states was written by the build (err %v)", layout, err)
		}
	}
}

func TestBuildArenaAllocatesPresentBuffersAndZeroesNormUnitW(t *testing.T) {
	r := newRig(t, gpuworker.HostSimConfig{}, nil)
	ctx := context.Background()
	a, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range arena.BufferIDs() {
		present := id == arena.HiddenStates || id == arena.NormUnitW || id == arena.Logits
		if (a.Ptr(id) != 0) != present {
			t.Fatalf("%s: pointer %#x, present %v", id, uint64(a.Ptr(id)), present)
		}
	}
	got, err := r.w.CopyDtoH(ctx, a.Ptr(arena.NormUnitW), 2*mib)
	if err != nil || !bytes.Equal(got, make([]byte, 2*mib)) {
		t.Fatalf("norm_unit_w is not zero-filled (err %v)", err)
	}
	l, _ := r.w.Ledger(ctx)
	var labels []string
	for _, e := range l.Entries {
		labels = append(labels, e.Owner+":"+e.Label)
	}
	if want := "arena:hidden_states arena:logits arena:norm_unit_w slab/ssm_rowwise_w_bf16:ssm_rowwise_w_bf16"; strings.Join(labels, " ") != want {
		t.Fatalf("ledger %q, want %q", labels, want)
	}
	if l.Counters.CurrentBytes != 10*mib || l.Owners[device.ArenaOwner].CurrentBytes != 6*mib {
		t.Fatalf("ledger holds %d B, arena %d B; want 10 MiB, 6 MiB", l.Counters.CurrentBytes, l.Owners[device.ArenaOwner].CurrentBytes)
	}
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete); !errors.Is(err, actors.ErrArenaBuilt) {
		t.Fatalf("second build: %v, want ErrArenaBuilt", err)
	}
}

// Allocations 1–3 are the discrete buffers, 4 the slab: a failure at any of
// them leaves nothing behind.
func TestBuildArenaRollsBackAtEveryAllocation(t *testing.T) {
	ctx := context.Background()
	for k := 1; k <= 4; k++ {
		r := newRig(t, gpuworker.HostSimConfig{}, faulty(gpuworker.Faults{FailAllocAt: k}))
		_, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete)
		if !errors.Is(err, gpuworker.ErrOutOfMemory) {
			t.Fatalf("fault at allocation %d: %v, want ErrOutOfMemory", k, err)
		}
		l, _ := r.w.Ledger(ctx)
		if len(l.Entries) != 0 || r.sim.BytesInUse() != 0 {
			t.Fatalf("fault at allocation %d: ledger %d entries, backend %d B; want both empty", k, len(l.Entries), r.sim.BytesInUse())
		}
		// The supervisor is still usable: forward says there is no arena.
		if _, err := r.s.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); !errors.Is(err, actors.ErrNoArena) {
			t.Fatalf("forward after a failed build: %v, want ErrNoArena", err)
		}
	}
}

func TestBuildArenaRollsBackWhenZeroFillFails(t *testing.T) {
	for _, layout := range []device.Layout{device.LayoutDiscrete, device.LayoutPooled} {
		r := newRig(t, gpuworker.HostSimConfig{}, func(h *gpuworker.HostSim) gpuworker.Backend { return memsetFailing{h} })
		_, err := r.s.BuildArena(context.Background(), testPlan(), layout)
		if !errors.Is(err, gpuworker.ErrInjected) {
			t.Fatalf("%s: got %v, want the injected memset failure", layout, err)
		}
		if r.sim.BytesInUse() != 0 {
			t.Fatalf("%s: backend holds %d B after a failed zero-fill, want 0", layout, r.sim.BytesInUse())
		}
	}
}

// A pooled arena is one backend allocation; the ledger shows it and a view per
// buffer, a copy cannot run from one buffer into the next, and release frees
// it in one call.
func TestPooledArena(t *testing.T) {
	r := newRig(t, gpuworker.HostSimConfig{RecordThreads: true}, nil)
	ctx := context.Background()
	plan := withSlabs(testPlan())
	a, err := r.s.BuildArena(ctx, plan, device.LayoutPooled)
	if err != nil {
		t.Fatal(err)
	}
	// hidden_states [0, 1 MiB), logits [1 MiB, 4 MiB), norm_unit_w [4 MiB, 6 MiB): BufferID order.
	if a.Pool == 0 || a.PoolBytes != 6*mib || a.Ptr(arena.HiddenStates) != a.Pool || a.Ptr(arena.Logits) != a.Pool+mib || a.Ptr(arena.NormUnitW) != a.Pool+4*mib {
		t.Fatalf("pooled arena %+v", a)
	}
	if r.sim.BytesInUse() != 6*mib {
		t.Fatalf("backend holds %d B, want one 6 MiB pool", r.sim.BytesInUse())
	}
	l, _ := r.w.Ledger(ctx)
	labels := []string{}
	for _, e := range l.Entries {
		labels = append(labels, e.Label)
		if e.Label != device.PoolLabel && e.Parent != a.Pool {
			t.Fatalf("view %+v has parent %#x, want the pool %#x", e, uint64(e.Parent), uint64(a.Pool))
		}
	}
	if want := "arena_pool hidden_states logits norm_unit_w"; strings.Join(labels, " ") != want {
		t.Fatalf("ledger labels %q, want %q", labels, want)
	}
	if l.Counters.CurrentBytes != 6*mib || l.Counters.Allocations != 1 {
		t.Fatalf("counters %+v, want one 6 MiB allocation", l.Counters)
	}
	_, err = r.s.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		return dev.CopyDtoD(a.Ptr(arena.Logits), a.Ptr(arena.HiddenStates), 2*mib)
	})
	if !errors.Is(err, gpuworker.ErrOutOfRange) {
		t.Fatalf("a copy past the end of hidden_states: %v, want ErrOutOfRange", err)
	}
	rep, err := r.s.Release(ctx)
	if err != nil || rep.Freed != 1 || rep.Bytes != 6*mib || r.sim.BytesInUse() != 0 {
		t.Fatalf("release %+v, %v; backend %d B", rep, err, r.sim.BytesInUse())
	}
	l, _ = r.w.Ledger(ctx)
	if len(l.Entries) != 0 {
		t.Fatalf("ledger after release: %+v", l.Entries)
	}
}

func TestReleaseIsIdempotentAndKeepsGoing(t *testing.T) {
	// Release walks resources newest first, each arena's buffer table
	// backwards: the slab (registered last), then norm_unit_w, logits,
	// hidden_states. Fail the second free: norm_unit_w.
	r := newRig(t, gpuworker.HostSimConfig{}, faulty(gpuworker.Faults{FailFreeAt: 2}))
	ctx := context.Background()
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutDiscrete); err != nil {
		t.Fatal(err)
	}
	rep, err := r.s.Release(ctx)
	if !errors.Is(err, gpuworker.ErrInjected) {
		t.Fatalf("first release: %v, want the injected free failure", err)
	}
	if rep.Freed != 3 || rep.Bytes != 4*mib+3*mib+1*mib {
		t.Fatalf("first release freed %d allocations, %d B; want 3, %d B", rep.Freed, rep.Bytes, 8*mib)
	}
	if r.sim.BytesInUse() != 2*mib {
		t.Fatalf("backend holds %d B, want norm_unit_w's 2 MiB", r.sim.BytesInUse())
	}
	rep, err = r.s.Release(ctx)
	if err != nil || rep.Freed != 1 || rep.Bytes != 2*mib {
		t.Fatalf("second release: %+v, %v; want exactly norm_unit_w retried", rep, err)
	}
	rep, err = r.s.Release(ctx)
	if err != nil || rep.Freed != 0 {
		t.Fatalf("third release: %+v, %v; want a no-op", rep, err)
	}
	l, _ := r.w.Ledger(ctx)
	if l.Counters.CurrentBytes != 0 || r.sim.BytesInUse() != 0 || l.Counters.Frees != 4 {
		t.Fatalf("after release: ledger %+v, backend %d B", l.Counters, r.sim.BytesInUse())
	}
	if _, err := r.s.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); !errors.Is(err, actors.ErrReleased) {
		t.Fatalf("forward after release: %v, want ErrReleased", err)
	}
	if _, _, err := r.s.CarveSlab(ctx, "ssm_rowwise_w_bf16", 256, 0); !errors.Is(err, actors.ErrReleased) {
		t.Fatalf("carve after release: %v, want ErrReleased", err)
	}
}

func TestSlabCarveBumpsAndRefuses(t *testing.T) {
	r := newRig(t, gpuworker.HostSimConfig{}, nil)
	ctx := context.Background()
	plan := withSlabs(testPlan(), arena.SlabSpec{Name: "w", Bytes: 4096})
	a, err := r.s.BuildArena(ctx, plan, device.LayoutPooled)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Slabs) != 1 || a.Slabs[0].Name != "w" || a.Slabs[0].Bytes != 4096 {
		t.Fatalf("arena slabs %+v, want w of 4096 B", a.Slabs)
	}
	first, off, err := r.s.CarveSlab(ctx, "w", 1000, 0)
	if err != nil || off != 0 || first != a.Slabs[0].Ptr {
		t.Fatalf("first carve: %#x at offset %d, %v", uint64(first), off, err)
	}
	second, off, err := r.s.CarveSlab(ctx, "w", 1000, 0)
	if err != nil || off != 1024 || second != first+1024 {
		t.Fatalf("second carve: %#x at offset %d, %v; want offset 1024 (256-byte aligned)", uint64(second), off, err)
	}
	_, _, err = r.s.CarveSlab(ctx, "w", 3000, 0)
	var se *arena.SlabError
	if !errors.Is(err, arena.ErrSlabExhausted) || !errors.As(err, &se) || se.Asked != 3000 || se.Used != 2024 || se.Capacity != 4096 {
		t.Fatalf("carve past the end: %v, want ErrSlabExhausted naming 3000 asked, 2024 used, 4096 capacity", err)
	}
	_, _, err = r.s.CarveSlab(ctx, "nope", 16, 0)
	if !errors.Is(err, arena.ErrSlabAbsent) || !strings.Contains(err.Error(), "w 4096 B") {
		t.Fatalf("carve of an absent slab: %v, want ErrSlabAbsent naming slab w of 4096 B", err)
	}
	// Carves allocate nothing: the slab owner holds the one 4096 B slab.
	l, _ := r.w.Ledger(ctx)
	if u := l.Owners[device.SlabOwner("w")]; u.CurrentBytes != 4096 || l.Counters.Allocations != 2 {
		t.Fatalf("slab owner holds %d B over %d allocations; want 4096 B, 2 allocations (pool + slab)", u.CurrentBytes, l.Counters.Allocations)
	}
}

// A release runs to its end once started, whatever the caller's context
// says: here the caller gives up while the slab supervisor does its part.
// The release still frees everything, so a second Release finds nothing left.
func TestReleaseRunsToItsEndAfterTheCallerGivesUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var releasing atomic.Bool
	gaveUp := make(chan struct{})
	hook := func(supervisor string, point actors.Point) {
		if supervisor == "slab" && point == actors.PointReceive && releasing.Load() {
			cancel()
			<-gaveUp // the release goes on once its caller has returned
		}
	}
	r := newRig(t, gpuworker.HostSimConfig{}, nil, actors.WithHook(hook), actors.WithLogger(quiet))
	if _, err := r.s.BuildArena(ctx, testPlan(), device.LayoutPooled); err != nil {
		t.Fatal(err)
	}
	// A carve is answered after the slab supervisor has adopted the slabs:
	// from here on, the next message it receives is the release.
	if _, _, err := r.s.CarveSlab(ctx, arena.SlabSSMRowwiseW, 256, 0); err != nil {
		t.Fatal(err)
	}
	releasing.Store(true)
	_, err := r.s.Release(ctx)
	close(gaveUp)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("release: %v, want context.Canceled", err)
	}
	rep, err := r.s.Release(context.Background())
	if err != nil || rep.Freed != 0 {
		t.Fatalf("second release: %+v, %v; want nothing left to free", rep, err)
	}
	if l, _ := r.w.Ledger(context.Background()); l.Counters.CurrentBytes != 0 || l.Counters.Frees != 2 || r.sim.BytesInUse() != 0 {
		t.Fatalf("ledger %+v, device %d B; want the pool and the slab freed once each", l.Counters, r.sim.BytesInUse())
	}
}
