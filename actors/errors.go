package actors

import "errors"

// Sentinel errors of the supervisors; each is wrapped with the sizes or
// names involved.
var (
	// ErrArenaBuilt: BuildArena on a supervisor that already holds an arena.
	ErrArenaBuilt = errors.New("arena already built")
	// ErrNoArena: a forward step before BuildArena succeeded.
	ErrNoArena = errors.New("no arena built")
	// ErrReleased: a forward step or carve after the arena or slabs were released.
	ErrReleased = errors.New("arena released")
)
