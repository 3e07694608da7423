package messages

import (
	"context"

	"github.com/gpuarena/gpuarena/device"
)

// The requests below record, in the GPU actor's ledger, what the arena, slab
// and release supervisors need to rebuild their state after a restart, beside
// the built arena (the Tag of its AllocBatch): how far each slab has been
// carved (AddView), and that the arena was released (RetireOwners). Neither
// calls the backend. The owners "arena" (device.ArenaOwner) and
// "slab/<name>" (device.SlabOwner) are reserved for the supervisors.

// AddView records View as a view of the live allocation at Parent, held by
// Owner: the slab supervisor records each carve this way, so the ledger
// knows how much of a slab is carved. The view must lie inside the parent and
// not overlap its other views (gpuworker.ErrInvalidValue); a parent the
// ledger does not know gives gpuworker.ErrNotAllocated, one held by another
// owner gpuworker.ErrNotOwner. Reply: the error, nil on success.
type AddView struct {
	Ctx    context.Context
	Owner  string
	Parent device.DevicePtr
	View   PoolView
	Reply  chan<- error
}

// RetireOwners records Owners as retired in the ledger
// (device.Ledger.Retired): the arena supervisor retires device.ArenaOwner
// when the arena is released, so a restarted supervisor still refuses
// forward steps, carves and builds with ErrReleased. It frees nothing.
// Reply: nil.
type RetireOwners struct {
	Ctx    context.Context
	Owners []string
	// Restore takes Owners off the retired list instead: a manager reset
	// after its release (gpuarena.Manager.Reset).
	Restore bool
	Reply   chan<- error
}

// ResetArena ends a completed release, so the arena can be built again:
// sent to the arena supervisor, which hands it on to the slab supervisor;
// the slab supervisor replies. Reply: nil, or why it cannot (the arena was
// not released, or its release has not freed everything).
type ResetArena struct {
	Ctx   context.Context
	Reply chan<- error
}
