package actors

import (
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// ledgerState is what the supervisors know, read back from the GPU actor's
// ledger, the single source of truth. Each supervisor rebuilds its state from
// it when it starts, so a restart (RestartStrategy) loses nothing:
//
//   - the arena supervisor: the built arena (the *builtArena its
//     allocations are tagged with), whether it was released (the arena owner
//     is retired), and what a failed build's rollback could not free
//     (untagged allocations of the arena and slab owners), which it frees;
//   - the slab supervisor: each slab of the arena and how far it is carved
//     (the end of the last of the slab's views: each carve is one);
//   - the release supervisor: what of the arena and its slabs is still live.
type ledgerState struct {
	// arena is the built arena, nil when none was built (or all of it freed),
	// and shared the copy of it handed out (builtArena).
	arena  *device.Arena
	shared *device.Arena
	// live are the live allocations of the arena and slab owners, by pointer.
	live map[device.DevicePtr]device.LedgerEntry
	// orphans are the untagged live allocations of the arena and slab owners.
	orphans []device.LedgerEntry
	// views are those allocations' views (pool buffers, slab carves), by parent.
	views map[device.DevicePtr][]device.LedgerEntry
	// retired: the arena was released.
	retired bool
}

// reserved reports whether owner is one of the supervisors' owners.
func reserved(owner string) bool {
	return owner == device.ArenaOwner || device.IsSlabOwner(owner)
}

// readLedger reads the supervisors' state from the ledger. It waits for the
// GPU actor with no context: it runs when a supervisor starts, before any
// request is served.
func readLedger(w *gpuworker.Worker) (ledgerState, error) {
	l, err := w.Ledger(uncancelled)
	if err != nil {
		return ledgerState{}, err
	}
	st := ledgerState{live: make(map[device.DevicePtr]device.LedgerEntry), views: make(map[device.DevicePtr][]device.LedgerEntry)}
	for _, o := range l.Retired {
		if o == device.ArenaOwner {
			st.retired = true
		}
	}
	for _, e := range l.Entries {
		switch {
		case !reserved(e.Owner):
		case e.Parent != 0:
			st.views[e.Parent] = append(st.views[e.Parent], e)
		default:
			st.live[e.Ptr] = e
			if b, ok := e.Tag.(*builtArena); ok && b != nil {
				st.arena, st.shared = b.own, b.shared
			} else {
				st.orphans = append(st.orphans, e)
			}
		}
	}
	return st, nil
}

// carved is how many bytes of the slab are carved: the end of its last view.
func (st ledgerState) carved(sl device.Slab) int64 {
	var used int64
	for _, v := range st.views[sl.Ptr] {
		used = max(used, int64(v.Ptr-sl.Ptr)+v.Bytes)
	}
	return used
}
