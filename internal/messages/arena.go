package messages

import (
	"context"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// The requests below are answered by the arena, slab and release supervisors
// (package actors).

// BuildArena asks the arena supervisor to allocate every present buffer of
// Plan (one pool, or one allocation per buffer for the discrete layout) and
// every slab of the plan, zero-fill the buffers whose arena.BufferID.ZeroFill
// is true, and hand the slabs to the
// slab supervisor — all or nothing: on any failure everything it allocated
// is freed. Reply: BuildArenaReply.
type BuildArena struct {
	Ctx    context.Context
	Plan   *arena.Plan
	Layout device.Layout // "" means device.LayoutPooled
	Reply  chan<- BuildArenaReply
}

// BuildArenaReply answers BuildArena.
type BuildArenaReply struct {
	Arena *device.Arena
	Err   error
}

// ArenaStep is the work of one forward step: it gets the arena and the device
// handle, both valid only while it runs, on the GPU thread.
type ArenaStep func(a *device.Arena, dev device.Device) error

// RunForward asks the arena supervisor to run one forward step on the arena.
// Reply: ForwardReply, sent once: by the arena supervisor when it refuses
// the step, otherwise by the GPU actor it hands the step to
// (Worker.QueueForward), which answers after the step.
type RunForward struct {
	Ctx   context.Context
	Step  ArenaStep
	Reply chan<- ForwardReply
}

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
	Ptr    device.DevicePtr
	Offset int64
	Err    error
}

// RegisterArena hands a built arena from the arena supervisor to the slab
// supervisor, which carves its slabs from then on, and to the release
// supervisor, which registers the arena and its slabs in that order (so the
// slabs are freed first). The arena supervisor sends it before it answers
// the build, so it is in both mailboxes before any later carve or release
// of the arena; a restarted arena supervisor sends it again unless the arena
// is retired, and a supervisor ignores what it has already. Arena is the
// supervisors' own copy, never the one handed to the caller.
type RegisterArena struct {
	Arena *device.Arena
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
	device.ReleaseReport
	Err error
}
