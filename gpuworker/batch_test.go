package gpuworker_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// buildItems are an arena-like batch: a 1 MiB pool with two views, the
// second zero-filled, and a 4 KiB slab held by its own owner.
func buildItems() []messages.AllocItem {
	return []messages.AllocItem{
		{Label: "pool", Bytes: mib,
			Views: []messages.PoolView{{Label: "a", Offset: 0, Bytes: 4096}, {Label: "b", Offset: 4096, Bytes: 8192}},
			Zero:  []messages.ByteRange{{Offset: 4096, Bytes: 8192}}},
		{Owner: "slab/s", Label: "s", Bytes: 4096},
	}
}

// A batch is recorded whole: each allocation under its owner, the pool's
// views inside it, and every allocation (not the views) tagged with what the
// tag function made of the pointers, before the reply.
func TestAllocBatchTagsTheWholeBatch(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	type built struct{ pool, slab device.DevicePtr }
	ptrs, tag, err := w.AllocBatch(ctx, "arena", buildItems(), func(p []device.DevicePtr) any { return &built{p[0], p[1]} })
	if err != nil {
		t.Fatal(err)
	}
	b, ok := tag.(*built)
	if !ok || len(ptrs) != 2 || b.pool != ptrs[0] || b.slab != ptrs[1] {
		t.Fatalf("ptrs %v, tag %#v: want two pointers and the tag made of them", ptrs, tag)
	}
	l, err := w.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		owner  string
		ptr    device.DevicePtr
		parent device.DevicePtr
		tagged bool
	}{
		"pool": {"arena", ptrs[0], 0, true},
		"a":    {"arena", ptrs[0], ptrs[0], false},
		"b":    {"arena", ptrs[0] + 4096, ptrs[0], false},
		"s":    {"slab/s", ptrs[1], 0, true},
	}
	if len(l.Entries) != len(want) {
		t.Fatalf("ledger has %d entries, want %d: %+v", len(l.Entries), len(want), l.Entries)
	}
	for _, e := range l.Entries {
		w, ok := want[e.Label]
		if !ok || e.Owner != w.owner || e.Ptr != w.ptr || e.Parent != w.parent || (e.Tag == tag) != w.tagged {
			t.Errorf("entry %s: owner %q ptr %#x parent %#x tag %v; want %+v", e.Label, e.Owner, uint64(e.Ptr), uint64(e.Parent), e.Tag, w)
		}
	}
	if got := l.BytesByOwner(); got["arena"] != mib || got["slab/s"] != 4096 || sim.BytesInUse() != mib+4096 {
		t.Fatalf("bytes by owner %v, backend %d B; want arena 1 MiB, slab/s 4 KiB", got, sim.BytesInUse())
	}
}

// A zero-fill that fails undoes the batch: both allocations are freed, the
// tag function never runs, and the error names the allocation.
func TestAllocBatchZeroFillFailureRollsBack(t *testing.T) {
	w, sim := startFaulty(t, gpuworker.HostSimConfig{}, gpuworker.Faults{FailMemsetAt: 1})
	ctx := context.Background()
	tagged := false
	ptrs, tag, err := w.AllocBatch(ctx, "arena", buildItems(), func([]device.DevicePtr) any { tagged = true; return 1 })
	if !errors.Is(err, gpuworker.ErrInjected) || !strings.Contains(err.Error(), "zero-fill pool/b at offset 4096 (8192 B)") {
		t.Fatalf("AllocBatch: %v, want the injected memset error naming the pool's zero range", err)
	}
	if ptrs != nil || tag != nil || tagged {
		t.Fatalf("ptrs %v, tag %v, tag func ran %v; want nothing", ptrs, tag, tagged)
	}
	l, _ := w.Ledger(ctx)
	if len(l.Entries) != 0 || l.Counters.Allocations != 2 || l.Counters.Frees != 2 || sim.BytesInUse() != 0 {
		t.Fatalf("ledger %+v, counters %+v, backend %d B; want empty after 2 allocations and 2 frees", l.Entries, l.Counters, sim.BytesInUse())
	}
}

// Bad views and zero ranges are refused before anything is allocated.
func TestAllocBatchChecksEveryItemFirst(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		bad  messages.AllocItem
		want string
	}{
		{"zero range outside", messages.AllocItem{Label: "z", Bytes: 4096, Zero: []messages.ByteRange{{Offset: 4000, Bytes: 200}}}, "z (4096 B): zero range at offset 4000 (200 B)"},
		{"empty zero range", messages.AllocItem{Label: "z", Bytes: 4096, Zero: []messages.ByteRange{{Offset: 0, Bytes: 0}}}, "zero range at offset 0 (0 B)"},
		{"views out of order", messages.AllocItem{Label: "p", Bytes: 4096, Views: []messages.PoolView{{Label: "b", Offset: 2048, Bytes: 16}, {Label: "a", Offset: 0, Bytes: 16}}}, "view a at offset 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			items := append(buildItems(), c.bad)
			_, _, err := w.AllocBatch(ctx, "arena", items, nil)
			if !errors.Is(err, gpuworker.ErrInvalidValue) || !strings.Contains(err.Error(), "item 3 of 3") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("AllocBatch: %v, want ErrInvalidValue naming item 3 of 3 and %q", err, c.want)
			}
			l, _ := w.Ledger(ctx)
			if l.Counters.Allocations != 0 || sim.BytesInUse() != 0 {
				t.Fatalf("%d allocations, backend %d B: want none", l.Counters.Allocations, sim.BytesInUse())
			}
		})
	}
}

// A tag function that panics fails the batch, which is rolled back; the GPU
// actor keeps serving.
func TestAllocBatchTagPanicRollsBack(t *testing.T) {
	w, sim := startSim(t, gpuworker.HostSimConfig{})
	ctx := context.Background()
	_, _, err := w.AllocBatch(ctx, "arena", buildItems(), func([]device.DevicePtr) any { panic("a tag bug") })
	if !errors.Is(err, gpuworker.ErrTagPanic) || !strings.Contains(err.Error(), "a tag bug") {
		t.Fatalf("AllocBatch: %v, want ErrTagPanic carrying the panic", err)
	}
	if l, _ := w.Ledger(ctx); len(l.Entries) != 0 || sim.BytesInUse() != 0 {
		t.Fatalf("ledger %+v, backend %d B after the rollback; want empty", l.Entries, sim.BytesInUse())
	}
	if _, _, err := w.AllocBatch(ctx, "arena", buildItems(), nil); err != nil || w.Err() != nil {
		t.Fatalf("the next batch: %v (worker: %v), want success", err, w.Err())
	}
}
