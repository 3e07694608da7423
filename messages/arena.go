package messages

import (
	"context"
	"time"

	"github.com/gpuarena/gpuarena/arena"
)

// ArenaOwner is the ledger owner of every arena buffer.
const ArenaOwner = "arena"

// Layout is how an arena's buffers are allocated.
type Layout string

const (
	// LayoutPooled puts every buffer in one allocation at 256-byte-aligned
	// offsets (arena.NewPoolLayout): one driver call to build, one to release,
	// no per-allocation rounding. The ledger shows the pool and a view per buffer.
	LayoutPooled Layout = "pooled"
	// LayoutDiscrete gives every buffer its own allocation, so a memory
	// checker (compute-sanitizer) sees each buffer's bounds.
	LayoutDiscrete Layout = "discrete"
)

// PoolLabel is the ledger label of a pooled arena's allocation.
const PoolLabel = "arena_pool"

// Arena is a built arena: one device pointer per BufferID, NULL for a buffer
// the plan leaves out. The caller of BuildArena and every forward step share
// one copy, and its Plan: treat both as read-only. The supervisors keep
// their own copy, so changing the shared one cannot make Release miss an
// allocation, and cannot reach memory the arena does not own either: every
// Device range is checked against the ledger.
type Arena struct {
	Plan *arena.Plan
	// Ptrs is indexed by BufferID.
	Ptrs [arena.NumBuffers]DevicePtr
	// Layout is how the buffers were allocated; Pool is the one allocation of
	// a pooled arena (0 for a discrete one) and PoolBytes its size.
	Layout    Layout
	Pool      DevicePtr
	PoolBytes int64
	// Slabs are the plan's slabs, allocated with the arena.
	Slabs []Slab

	shared *Arena // see Shared
}

// Clone returns a copy of a that shares nothing mutable with it but the Plan.
func (a *Arena) Clone() *Arena {
	c := *a
	c.Slabs = append([]Slab(nil), a.Slabs...)
	c.shared = nil
	return &c
}

// Shared returns the copy of a that the arena supervisor hands to the caller
// of BuildArena and to every forward step: made by the first call (Clone),
// the same on every later one, so a supervisor restarted after it finds a in
// the ledger hands out the same copy. Only the arena supervisor calls it.
func (a *Arena) Shared() *Arena {
	if a.shared == nil {
		a.shared = a.Clone()
	}
	return a.shared
}

// Ptr is the device pointer of buffer id (0 when the buffer is absent).
func (a *Arena) Ptr(id arena.BufferID) DevicePtr { return a.Ptrs[id] }

// Bytes is the size of buffer id in bytes (0 when absent).
func (a *Arena) Bytes(id arena.BufferID) int64 { return a.Plan.Buffers[id].Bytes }

// BuildArena asks the arena supervisor to allocate every present buffer of
// Plan (one pool, or one allocation per buffer for the discrete layout) and
// every slab of the plan, zero-fill the buffers whose arena.BufferID.ZeroFill
// is true, and hand the slabs to the
// slab supervisor — all or nothing: on any failure everything it allocated
// is freed. Reply: BuildArenaReply.
type BuildArena struct {
	Ctx    context.Context
	Plan   *arena.Plan
	Layout Layout // "" means LayoutPooled
	Reply  chan<- BuildArenaReply
}

// BuildArenaReply answers BuildArena.
type BuildArenaReply struct {
	Arena *Arena
	Err   error
}

// ArenaStep is the work of one forward step: it gets the arena and the device
// handle, both valid only while it runs, on the GPU thread.
type ArenaStep func(a *Arena, dev Device) error

// RunForward asks the arena supervisor to run one forward step on the arena.
// Reply: ForwardReply.
type RunForward struct {
	Ctx   context.Context
	Step  ArenaStep
	Reply chan<- ForwardReply
}

// Slab is one slab allocation, carved bump-only.
type Slab struct {
	Name  string
	Ptr   DevicePtr
	Bytes int64
}

// SlabOwner is the ledger owner of the slab named name.
func SlabOwner(name string) string { return "slab/" + name }

// CarveSlab asks the slab supervisor for the next Bytes bytes of slab Name,
// aligned to Align bytes (0: 256). Carving is bump-only: nothing is ever
// returned to a slab. Reply: CarveSlabReply.
type CarveSlab struct {
	Ctx   context.Context
	Name  string
	Bytes int64
	Align int64
	Reply chan<- CarveSlabReply
}

// CarveSlabReply answers CarveSlab: the carved region's pointer and its offset
// in the slab, or an error (arena.ErrSlabAbsent, arena.ErrSlabExhausted).
type CarveSlabReply struct {
	Ptr    DevicePtr
	Offset int64
	Err    error
}

// RegisterArena hands a built arena from the arena supervisor to the slab
// supervisor, which carves its slabs from then on, and to the release
// supervisor, which registers the arena and its slabs in that order (so the
// slabs are freed first). The arena supervisor sends it before it answers
// the build, so it is in both mailboxes before any later carve or release
// of the arena; a restarted arena supervisor sends it again unless the arena
// is retired, and a supervisor ignores what it has already.
type RegisterArena struct {
	Arena *Arena
}

// Release releases the arena. It travels the supervisors in order, each
// doing its part behind the requests already in its mailbox and handing it
// on: the arena supervisor retires the arena (later forward steps and builds
// fail with ErrReleased; an arena that was never built is answered at once
// with ErrNoArena) and records the retirement in the ledger (RetireErr is
// that record's error); the slab supervisor retires the slabs (later carves
// fail with ErrReleased); the release supervisor frees every registered
// resource, in reverse order of registration, walking each arena's buffer
// table backwards, keeping going after an error, and answers. It carries no
// context: once started, a release runs to its end (the caller's context
// bounds only its wait). Reply: ReleaseReply.
type Release struct {
	RetireErr error
	Reply     chan<- ReleaseReply
}

// ReleaseReply answers Release: what was freed and the first error.
type ReleaseReply struct {
	Freed    int
	Bytes    int64
	Duration time.Duration
	Err      error
}
