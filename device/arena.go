package device

import (
	"strings"

	"github.com/gpuarena/gpuarena/arena"
)

// Layout is how an arena's buffers are allocated: LayoutPooled or
// LayoutDiscrete.
type Layout string

const (
	// LayoutPooled puts every buffer in one allocation at 256-byte-aligned
	// offsets (arena.NewPoolLayout): one driver call to build, one to release,
	// no per-allocation rounding. The ledger shows the pool (labelled
	// PoolLabel) and a view per buffer. It is the default.
	LayoutPooled Layout = "pooled"
	// LayoutDiscrete gives every buffer its own allocation, so a memory
	// checker (compute-sanitizer) sees each buffer's bounds.
	LayoutDiscrete Layout = "discrete"
)

// The ledger's names for a built arena's allocations (LedgerEntry.Owner and
// Label, Ledger.Owners, the metrics' owner label). The owners are reserved
// for the arena's supervisors.
const (
	// ArenaOwner is the ledger owner of every arena buffer (or of the pool).
	ArenaOwner = "arena"
	// PoolLabel is the ledger label of a pooled arena's one allocation; its
	// buffers are views labelled with their arena.BufferID's name.
	PoolLabel = "arena_pool"
)

// SlabOwner is the ledger owner of the slab named name: "slab/" + name. The
// slab's allocation is labelled name, and each carve is a view of it.
func SlabOwner(name string) string { return "slab/" + name }

// IsSlabOwner reports whether owner is a slab's: SlabOwner(name) for some
// name.
func IsSlabOwner(owner string) bool { return strings.HasPrefix(owner, SlabOwner("")) }

// Arena is a built arena: one device pointer per arena.BufferID, NULL for a
// buffer the plan leaves out, and the plan's slabs. The caller of BuildArena
// and every forward step share one copy, and its Plan: treat both as
// read-only. The supervisors keep their own copy, so changing the shared one
// cannot make Release miss an allocation, and cannot reach memory the arena
// does not own either: every Device range is checked against the ledger.
type Arena struct {
	// Plan is the plan the arena was built from: each buffer's size, dtype
	// and shape (Plan.Buffers, indexed by arena.BufferID), and the totals in
	// bytes.
	Plan *arena.Plan
	// Ptrs is each buffer's device pointer, indexed by arena.BufferID; 0 for
	// a buffer the plan leaves out.
	Ptrs [arena.NumBuffers]DevicePtr
	// Layout is how the buffers were allocated.
	Layout Layout
	// Pool is the one allocation of a pooled arena (0 for a discrete one),
	// and PoolBytes its size in bytes: the buffers at their 256-byte-aligned
	// offsets, rounded up.
	Pool      DevicePtr
	PoolBytes int64
	// Slabs are the plan's slabs, in the plan's order, allocated with the
	// arena; carve them with the manager's CarveSlab.
	Slabs []Slab
}

// Clone returns a copy of a that shares nothing mutable with it but the Plan.
func (a *Arena) Clone() *Arena {
	c := *a
	c.Slabs = append([]Slab(nil), a.Slabs...)
	return &c
}

// Ptr is the device pointer of buffer id (0 when the buffer is absent).
func (a *Arena) Ptr(id arena.BufferID) DevicePtr { return a.Ptrs[id] }

// Bytes is the size of buffer id in bytes (0 when absent).
func (a *Arena) Bytes(id arena.BufferID) int64 { return a.Plan.Buffers[id].Bytes }

// Slab is one slab allocation, carved bump-only: nothing carved is ever
// returned to it.
type Slab struct {
	// Name is the slab's name in the plan (arena.SlabSpec.Name), such as
	// arena.SlabSSMRowwiseW.
	Name string
	// Ptr is the slab's device pointer and Bytes its size in bytes.
	Ptr   DevicePtr
	Bytes int64
}
