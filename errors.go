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
	// ErrNoArena, ErrArenaBuilt, ErrReleased: arena lifecycle misuse.
	ErrNoArena    = actors.ErrNoArena
	ErrArenaBuilt = actors.ErrArenaBuilt
	ErrReleased   = actors.ErrReleased
	// ErrSlabAbsent: a carve of a slab the arena does not have.
	ErrSlabAbsent = arena.ErrSlabAbsent
)
