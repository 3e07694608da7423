package gpuworker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/gpuarena/gpuarena/messages"
)

// ledger records every live allocation the GPU actor made: label, owner,
// bytes, pointer, creation time. It is the single source of truth for what
// the process holds on the device. It is used on the GPU thread only.
type ledger struct {
	entries map[messages.DevicePtr]*ledgerEntry
	starts  []messages.DevicePtr // sorted, for range lookups
	// views are the buffers inside pool allocations, sorted by pointer; they
	// never overlap. A range that starts in a view must end in it.
	views    []*ledgerEntry
	seq      uint64
	counters messages.LedgerCounters
	owners   map[string]messages.OwnerUsage
}

type ledgerEntry struct {
	messages.LedgerEntry
	seq uint64
}

func newLedger() *ledger {
	return &ledger{entries: make(map[messages.DevicePtr]*ledgerEntry), owners: make(map[string]messages.OwnerUsage)}
}

// add records a successful allocation.
func (l *ledger) add(ptr messages.DevicePtr, bytes int64, label, owner string) {
	l.seq++
	l.entries[ptr] = &ledgerEntry{
		LedgerEntry: messages.LedgerEntry{Ptr: ptr, Bytes: bytes, Label: label, Owner: owner, Created: time.Now()},
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

// addViews records the buffers inside the pool allocation at parent, which
// must be live; the caller has checked that they lie inside it and do not
// overlap.
func (l *ledger) addViews(parent messages.DevicePtr, views []messages.PoolView) {
	p := l.entries[parent]
	for _, v := range views {
		l.seq++
		l.views = append(l.views, &ledgerEntry{
			LedgerEntry: messages.LedgerEntry{Ptr: parent + messages.DevicePtr(v.Offset), Bytes: v.Bytes, Label: v.Label, Owner: p.Owner, Parent: parent, Created: p.Created},
			seq:         l.seq,
		})
	}
	sort.Slice(l.views, func(i, j int) bool { return l.views[i].Ptr < l.views[j].Ptr })
}

// remove forgets a freed allocation and the views inside it.
func (l *ledger) remove(ptr messages.DevicePtr) {
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
func (l *ledger) lookup(ptr messages.DevicePtr, owner string) (*ledgerEntry, error) {
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
func (l *ledger) checkRange(ptr messages.DevicePtr, n int64) error {
	if n < 0 {
		return fmt.Errorf("%d B at %#x: %w: size must be ≥ 0", n, uint64(ptr), ErrInvalidValue)
	}
	if i := sort.Search(len(l.views), func(i int) bool { return l.views[i].Ptr > ptr }) - 1; i >= 0 {
		if v := l.views[i]; int64(ptr-v.Ptr) < v.Bytes {
			return v.checkInside(ptr, n)
		}
	}
	i := sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > ptr }) - 1
	if i < 0 {
		return fmt.Errorf("%#x: %w", uint64(ptr), ErrNotAllocated)
	}
	return l.entries[l.starts[i]].checkInside(ptr, n)
}

// checkInside verifies that [ptr, ptr+n) lies inside e.
func (e *ledgerEntry) checkInside(ptr messages.DevicePtr, n int64) error {
	off := int64(ptr - e.Ptr)
	if off >= e.Bytes {
		return fmt.Errorf("%#x: %w", uint64(ptr), ErrNotAllocated)
	}
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
func (l *ledger) snapshot(now time.Time) messages.Ledger {
	all := append(l.all(), l.views...)
	sort.Slice(all, func(i, j int) bool { return all[i].seq > all[j].seq })
	entries := make([]messages.LedgerEntry, len(all))
	for i, e := range all {
		entries[len(all)-1-i] = e.LedgerEntry
		entries[len(all)-1-i].Age = now.Sub(e.Created)
	}
	return messages.Ledger{Entries: entries, Counters: l.counters, Owners: maps.Clone(l.owners), BackendBytesInUse: -1, Taken: now}
}

// largest returns up to n entries, largest first.
func (l *ledger) largest(n int) []messages.LedgerEntry {
	all := l.all()
	sort.SliceStable(all, func(i, j int) bool { return all[i].Bytes > all[j].Bytes })
	out := make([]messages.LedgerEntry, 0, n)
	for _, e := range all[:min(n, len(all))] {
		out = append(out, e.LedgerEntry)
	}
	return out
}

// heldByOwner is the bytes each owner holds now (owners holding none left out).
func (l *ledger) heldByOwner() map[string]int64 {
	return messages.Ledger{Owners: l.owners}.BytesByOwner()
}
