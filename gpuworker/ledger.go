package gpuworker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// ledger records every live allocation the GPU actor made: label, owner,
// bytes, pointer, creation time. It is the single source of truth for what
// the process holds on the device. It is used on the GPU thread only.
type ledger struct {
	entries map[device.DevicePtr]*ledgerEntry
	starts  []device.DevicePtr // sorted, for range lookups
	// views are the buffers inside pool allocations, sorted by pointer; they
	// never overlap. A range that starts in a view must end in it.
	views    []*ledgerEntry
	seq      uint64
	counters device.LedgerCounters
	owners   map[string]device.OwnerUsage
	// retired are the owners retired with RetireOwners.
	retired map[string]struct{}
}

type ledgerEntry struct {
	device.LedgerEntry
	seq uint64
}

// ledgerRoom is how many allocations and views a new ledger has room for
// before its map and sorted slices grow: a discrete arena (one allocation per
// present buffer, at most arena.NumBuffers) and its slabs, or a pooled
// arena's views. Growing them in the middle of a build rehashes and copies
// on the GPU thread, on cold caches (a discrete build is 40 allocations).
const ledgerRoom = 2 * arena.NumBuffers

func newLedger() *ledger {
	return &ledger{
		entries: make(map[device.DevicePtr]*ledgerEntry, ledgerRoom),
		starts:  make([]device.DevicePtr, 0, ledgerRoom),
		views:   make([]*ledgerEntry, 0, ledgerRoom),
		owners:  make(map[string]device.OwnerUsage),
		retired: make(map[string]struct{}),
	}
}

// add records a successful allocation.
func (l *ledger) add(ptr device.DevicePtr, bytes int64, label, owner string) {
	l.seq++
	l.entries[ptr] = &ledgerEntry{
		LedgerEntry: device.LedgerEntry{Ptr: ptr, Bytes: bytes, Label: label, Owner: owner, Created: time.Now()},
		seq:         l.seq,
	}
	i := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] >= ptr })
	l.starts = append(l.starts, 0)
	copy(l.starts[i+1:], l.starts[i:])
	l.starts[i] = ptr
	l.counters.Allocations++
	l.counters.CurrentBytes += bytes
	l.counters.PeakBytes = max(l.counters.PeakBytes, l.counters.CurrentBytes)
	u := l.owners[owner]
	u.CurrentBytes += bytes
	u.PeakBytes = max(u.PeakBytes, u.CurrentBytes)
	l.owners[owner] = u
}

// addViews records the buffers inside the allocation at parent, which must
// be live; the caller has checked that they lie inside it, in increasing
// offset order, and do not overlap. The entries are made in one slice and
// go into the sorted views in one run: a pool's dozens of buffers cost two
// allocations.
func (l *ledger) addViews(parent device.DevicePtr, views []messages.PoolView) {
	if len(views) == 0 {
		return
	}
	p := l.entries[parent]
	made := make([]ledgerEntry, len(views))
	add := make([]*ledgerEntry, len(views))
	for i, v := range views {
		l.seq++
		made[i] = ledgerEntry{
			LedgerEntry: device.LedgerEntry{Ptr: parent + device.DevicePtr(v.Offset), Bytes: v.Bytes, Label: v.Label, Owner: p.Owner, Parent: parent, Created: p.Created},
			seq:         l.seq,
		}
		add[i] = &made[i]
	}
	// Views of different allocations do not overlap, so the new ones go in
	// one run, between the views below parent and those above it: a slab's
	// carves go in after its earlier ones, and only what is above moves.
	i := sort.Search(len(l.views), func(i int) bool { return l.views[i].Ptr > add[0].Ptr })
	l.views = slices.Insert(l.views, i, add...)
}

// addView records one more view of the live allocation e: it must lie inside
// e and overlap none of the views already recorded (ErrInvalidValue). Views
// of different allocations cannot overlap, so only the neighbours in pointer
// order need a look: O(log n) however many views there are.
func (l *ledger) addView(e *ledgerEntry, v messages.PoolView) error {
	if v.Bytes <= 0 || v.Offset < 0 || v.Offset > e.Bytes-v.Bytes {
		return fmt.Errorf("view %s at offset %d (%d B) of %s (%d B): %w: a view must be non-empty and inside its allocation",
			v.Label, v.Offset, v.Bytes, e.Label, e.Bytes, ErrInvalidValue)
	}
	start := e.Ptr + device.DevicePtr(v.Offset)
	end := start + device.DevicePtr(v.Bytes)
	i := sort.Search(len(l.views), func(i int) bool { return l.views[i].Ptr >= start })
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(l.views) {
			continue
		}
		if o := l.views[j]; o.Ptr < end && start < o.Ptr+device.DevicePtr(o.Bytes) {
			return fmt.Errorf("view %s at offset %d (%d B) of %s: %w: it overlaps view %s at offset %d (%d B)",
				v.Label, v.Offset, v.Bytes, e.Label, ErrInvalidValue, o.Label, int64(o.Ptr-e.Ptr), o.Bytes)
		}
	}
	l.addViews(e.Ptr, []messages.PoolView{v})
	return nil
}

// retire records owners as retired.
func (l *ledger) retire(owners []string) {
	for _, o := range owners {
		l.retired[o] = struct{}{}
	}
}

// restore takes owners off the retired list.
func (l *ledger) restore(owners []string) {
	for _, o := range owners {
		delete(l.retired, o)
	}
}

// remove forgets a freed allocation and the views inside it.
func (l *ledger) remove(ptr device.DevicePtr) {
	e, ok := l.entries[ptr]
	if !ok {
		return
	}
	l.views = slices.DeleteFunc(l.views, func(v *ledgerEntry) bool { return v.Parent == ptr })
	delete(l.entries, ptr)
	i := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] >= ptr })
	l.starts = append(l.starts[:i], l.starts[i+1:]...)
	l.counters.Frees++
	l.counters.CurrentBytes -= e.Bytes
	u := l.owners[e.Owner]
	u.CurrentBytes -= e.Bytes
	l.owners[e.Owner] = u
}

// failed counts an allocation the backend refused.
func (l *ledger) failed() { l.counters.Failures++ }

// lookup returns the entry at exactly ptr, checking its owner.
func (l *ledger) lookup(ptr device.DevicePtr, owner string) (*ledgerEntry, error) {
	e, ok := l.entries[ptr]
	if !ok {
		return nil, fmt.Errorf("%#x: %w", uint64(ptr), ErrNotAllocated)
	}
	if e.Owner != owner {
		return nil, fmt.Errorf("%#x (%s, %d B) is held by %q, not %q: %w", uint64(ptr), e.Label, e.Bytes, e.Owner, owner, ErrNotOwner)
	}
	return e, nil
}

// checkRange verifies that [ptr, ptr+n) lies inside one live allocation and,
// when it starts in a view of a pool, inside that view.
func (l *ledger) checkRange(ptr device.DevicePtr, n int64) error {
	if n < 0 {
		return fmt.Errorf("%d B at %#x: %w: size must be ≥ 0", n, uint64(ptr), ErrInvalidValue)
	}
	if i := sort.Search(len(l.views), func(i int) bool { return l.views[i].Ptr > ptr }) - 1; i >= 0 {
		if v := l.views[i]; uint64(ptr-v.Ptr) < uint64(v.Bytes) {
			return v.checkInside(ptr, n)
		}
	}
	i := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > ptr }) - 1
	if i < 0 {
		return fmt.Errorf("%#x: %w", uint64(ptr), ErrNotAllocated)
	}
	return l.entries[l.starts[i]].checkInside(ptr, n)
}

// checkInside verifies that [ptr, ptr+n) lies inside e, which starts at or
// below ptr. The offset is compared unsigned: a pointer 2⁶³ or more past the
// start would be a negative int64 and pass a signed comparison.
func (e *ledgerEntry) checkInside(ptr device.DevicePtr, n int64) error {
	if uint64(ptr-e.Ptr) >= uint64(e.Bytes) {
		return fmt.Errorf("%#x: %w", uint64(ptr), ErrNotAllocated)
	}
	off := int64(ptr - e.Ptr)
	if n > e.Bytes-off {
		return fmt.Errorf("%d B at offset %d of %s (%d B): %w", n, off, e.Label, e.Bytes, ErrOutOfRange)
	}
	return nil
}

// owned returns the owner's entries, newest first.
func (l *ledger) owned(owner string) []*ledgerEntry {
	var out []*ledgerEntry
	for _, e := range l.entries {
		if e.Owner == owner {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	return out
}

// all returns every entry, newest first.
func (l *ledger) all() []*ledgerEntry {
	out := make([]*ledgerEntry, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq > out[j].seq })
	return out
}

// snapshot copies the ledger, oldest entry first, each pool followed by its views.
func (l *ledger) snapshot(now time.Time) device.Ledger {
	all := append(l.all(), l.views...)
	sort.Slice(all, func(i, j int) bool { return all[i].seq > all[j].seq })
	entries := make([]device.LedgerEntry, len(all))
	for i, e := range all {
		entries[len(all)-1-i] = e.LedgerEntry
		entries[len(all)-1-i].Age = now.Sub(e.Created)
	}
	var retired []string
	if len(l.retired) > 0 {
		retired = slices.Sorted(maps.Keys(l.retired))
	}
	return device.Ledger{Entries: entries, Counters: l.counters, Owners: maps.Clone(l.owners), BackendBytesInUse: -1, Taken: now, Retired: retired}
}

// largest returns up to n entries, largest first.
func (l *ledger) largest(n int) []device.LedgerEntry {
	all := l.all()
	sort.SliceStable(all, func(i, j int) bool { return all[i].Bytes > all[j].Bytes })
	out := make([]device.LedgerEntry, 0, n)
	for _, e := range all[:min(n, len(all))] {
		out = append(out, e.LedgerEntry)
	}
	return out
}

// heldByOwner is the bytes each owner holds now (owners holding none left out).
func (l *ledger) heldByOwner() map[string]int64 {
	return device.Ledger{Owners: l.owners}.BytesByOwner()
}
