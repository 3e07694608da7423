package tests

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// The reference models of the model-based test: plain maps and counters that
// say what the ledger must hold and which error each request must get.

// shadow is one live allocation as the model sees it, with its contents.
type shadow struct {
	label string
	data  []byte
}

// ownerModel is what one client's owner holds. Only that client allocates or
// frees for its owner, so the model is exact whatever the other clients do.
type ownerModel struct {
	owner string
	live  map[device.DevicePtr]*shadow
	freed []device.DevicePtr // pointers this owner freed (a second free is a double free)
}

func newOwnerModel(owner string) *ownerModel {
	return &ownerModel{owner: owner, live: map[device.DevicePtr]*shadow{}}
}

// ptrs are the live pointers, sorted, so a seeded choice is reproducible.
func (m *ownerModel) ptrs() []device.DevicePtr { return slices.Sorted(maps.Keys(m.live)) }

// stale are pointers this owner freed that it does not hold again.
func (m *ownerModel) stale() []device.DevicePtr {
	var out []device.DevicePtr
	for _, p := range m.freed {
		if _, ok := m.live[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// checkOwned compares the ledger's entries for the owner with the model.
func (m *ownerModel) checkOwned(l device.Ledger) error {
	seen := 0
	for _, e := range l.Entries {
		if e.Owner != m.owner {
			continue
		}
		s, ok := m.live[e.Ptr]
		if !ok || e.Parent != 0 || e.Bytes != int64(len(s.data)) || e.Label != s.label {
			return fmt.Errorf("ledger entry %s %#x (%d B, parent %#x) is not in the model", e.Label, uint64(e.Ptr), e.Bytes, uint64(e.Parent))
		}
		seen++
	}
	if seen != len(m.live) {
		return fmt.Errorf("the ledger holds %d allocations for %s, the model %d", seen, m.owner, len(m.live))
	}
	return nil
}

// wantErr checks err against the sentinels a request may get (none: success).
func wantErr(what string, err error, allowed ...error) error {
	if len(allowed) == 0 {
		if err != nil {
			return fmt.Errorf("%s: %v, want success", what, err)
		}
		return nil
	}
	for _, a := range allowed {
		if errors.Is(err, a) {
			return nil
		}
	}
	return fmt.Errorf("%s: %v, want one of %v", what, err, allowed)
}

// arenaState is the arena's lifecycle in the model.
type arenaState int

const (
	noArena arenaState = iota
	builtArena
	releasedArena
)

// arenaModel is the arena, its slab and its carves as the model sees them.
type arenaModel struct {
	state  arenaState
	layout device.Layout
	arena  *device.Arena
	used   int64 // bytes carved from slab "w"
	carves []messages.PoolView
	hidden []byte // hidden_states' contents
}

// buildErr is the error a build must get.
func (m *arenaModel) buildErr() []error {
	switch m.state {
	case builtArena:
		return []error{actors.ErrArenaBuilt}
	case releasedArena:
		return []error{actors.ErrReleased}
	}
	return nil
}

// forwardErr is the error a forward step must get before it runs.
func (m *arenaModel) forwardErr() []error {
	switch m.state {
	case noArena:
		return []error{actors.ErrNoArena}
	case releasedArena:
		return []error{actors.ErrReleased}
	}
	return nil
}

// carve predicts a carve of n bytes from slab name: its offset, or the error.
func (m *arenaModel) carve(name string, n int64) (int64, []error) {
	switch {
	case m.state == releasedArena:
		return 0, []error{actors.ErrReleased}
	case m.state == noArena || name != "w":
		return 0, []error{arena.ErrSlabAbsent}
	case n <= 0:
		return 0, []error{arena.ErrInvalidCarve}
	}
	off := (m.used + actors.DefaultSlabAlign - 1) / actors.DefaultSlabAlign * actors.DefaultSlabAlign
	if off+n > m.arena.Slabs[0].Bytes {
		return 0, []error{arena.ErrSlabExhausted}
	}
	return off, nil
}

// release predicts a release: allocations and bytes freed.
func (m *arenaModel) release() (int, int64) {
	if m.state != builtArena {
		return 0, 0
	}
	slab := m.arena.Slabs[0].Bytes
	if m.layout == device.LayoutPooled {
		return 2, m.arena.PoolBytes + slab
	}
	return 4, m.arena.Plan.BufferBytes + slab
}

// checkLedger compares the ledger's arena and slab entries with the model.
func (m *arenaModel) checkLedger(l device.Ledger) error {
	var got, want []string
	for _, e := range l.Entries {
		if e.Owner == device.ArenaOwner || e.Owner == device.SlabOwner("w") {
			got = append(got, fmt.Sprintf("%s %s %#x %d", e.Owner, e.Label, uint64(e.Ptr), e.Bytes))
		}
	}
	if m.state == builtArena {
		a := m.arena
		if m.layout == device.LayoutPooled {
			want = append(want, fmt.Sprintf("arena %s %#x %d", device.PoolLabel, uint64(a.Pool), a.PoolBytes))
		}
		for _, id := range arena.BufferIDs() {
			if a.Ptr(id) != 0 {
				want = append(want, fmt.Sprintf("arena %s %#x %d", id, uint64(a.Ptr(id)), a.Bytes(id)))
			}
		}
		sl := a.Slabs[0]
		want = append(want, fmt.Sprintf("slab/w w %#x %d", uint64(sl.Ptr), sl.Bytes))
		for _, c := range m.carves {
			want = append(want, fmt.Sprintf("slab/w %s %#x %d", c.Label, uint64(sl.Ptr)+uint64(c.Offset), c.Bytes))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("arena ledger entries\n got  %q\n want %q", got, want)
	}
	return nil
}

// checkHidden compares hidden_states read back with the model.
func (m *arenaModel) checkHidden(got []byte) error {
	if i := firstDiffAt(got, m.hidden); i >= 0 {
		return fmt.Errorf("hidden_states differs from the model at byte %d", i)
	}
	return nil
}

func firstDiffAt(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
