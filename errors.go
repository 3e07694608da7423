package gpuarena

import (
	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Errors an embedder tests with errors.Is. They are the sentinels of the
// packages behind the facade, re-exported so an embedder needs only this one.
var (
	// ErrInvalidOption: an Option out of range; the error is an
	// *arena.OptionError naming it (errors.As).
	ErrInvalidOption = arena.ErrInvalidOption
	// ErrClosed: the manager is closed.
	ErrClosed = gpuworker.ErrClosed
	// ErrOutOfMemory: the device or the budget cannot hold a request; the
	// error is a *gpuworker.OutOfMemoryError (errors.As).
	ErrOutOfMemory = gpuworker.ErrOutOfMemory
	// ErrNoArena, ErrArenaBuilt, ErrReleased, ErrNotReleased: arena
	// lifecycle misuse (ErrNotReleased: Reset of an arena not released).
	ErrNoArena     = actors.ErrNoArena
	ErrArenaBuilt  = actors.ErrArenaBuilt
	ErrReleased    = actors.ErrReleased
	ErrNotReleased = actors.ErrNotReleased
	// ErrSlabAbsent: a carve of a slab the arena does not have.
	ErrSlabAbsent = arena.ErrSlabAbsent
	// ErrSlabExhausted: a carve past what is left of the slab.
	ErrSlabExhausted = arena.ErrSlabExhausted
	// ErrInvalidCarve: a carve of a size ≤ 0 or an alignment that is not a
	// power of two.
	ErrInvalidCarve = arena.ErrInvalidCarve
	// ErrInvalidValue: a bad argument (a nil plan or step, a size ≤ 0); the
	// error names it.
	ErrInvalidValue = gpuworker.ErrInvalidValue
	// ErrOutOfRange: a Device memset or copy that runs past the end of the
	// buffer (or allocation) it starts in.
	ErrOutOfRange = gpuworker.ErrOutOfRange
	// ErrNotAllocated: a Device pointer that is in no live allocation.
	ErrNotAllocated = gpuworker.ErrNotAllocated
	// ErrStepOver: a Device used after its forward step returned.
	ErrStepOver = gpuworker.ErrStepOver
	// ErrNotGPUThread: a Device used from a goroutine other than its forward
	// step's.
	ErrNotGPUThread = gpuworker.ErrNotGPUThread
	// ErrStepExited: a forward step called runtime.Goexit (t.FailNow,
	// require.* inside a step); the manager keeps serving.
	ErrStepExited = gpuworker.ErrStepExited
	// ErrReentrant: a Manager call from inside a forward step (on the GPU
	// thread), which would wait for itself.
	ErrReentrant = gpuworker.ErrReentrant
	// ErrBackendNotBuiltIn: the backend asked for (WithBackend) is not built
	// into this binary, e.g. cuda in a build without -tags cuda; the error is
	// a *gpuworker.BackendNotBuiltInError naming it and the backends built in
	// (errors.As).
	ErrBackendNotBuiltIn = gpuworker.ErrBackendNotBuiltIn
	// ErrBackendPanic: the backend panicked; the manager serves no more
	// requests (Manager.Err) and Close frees what it can.
	ErrBackendPanic = gpuworker.ErrBackendPanic
	// ErrActorPanic: a panic escaped the GPU actor, which stopped (it is
	// never restarted); see Manager.Err.
	ErrActorPanic = gpuworker.ErrActorPanic
	// ErrStepPanic: a forward step panicked (recovered; the manager keeps serving).
	ErrStepPanic = gpuworker.ErrStepPanic
	// ErrSupervisorPanic: a supervisor panicked handling the request and was
	// restarted with its state rebuilt from the ledger.
	ErrSupervisorPanic = actors.ErrSupervisorPanic
	// ErrSupervisorStopped: a supervisor failed too often and was stopped.
	ErrSupervisorStopped = actors.ErrSupervisorStopped
)
