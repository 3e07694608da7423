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
	// ErrNotReleased: a reset (Supervisors.Reset) of an arena that was not
	// released, or whose release has not freed all of it.
	ErrNotReleased = errors.New("arena not released")
	// ErrSupervisorPanic: the supervisor panicked while it handled the
	// request. The panic is answered with this error and the supervisor is
	// restarted (RestartStrategy), rebuilding its state from the GPU actor's
	// ledger; what the request had done by then is in the ledger (Ledger says).
	ErrSupervisorPanic = errors.New("supervisor panicked")
	// ErrSupervisorStopped: the supervisor failed more often than
	// RestartStrategy allows and was stopped; nothing it handles is served
	// any more, and Close (which frees everything through the GPU actor) is
	// what is left to do.
	ErrSupervisorStopped = errors.New("supervisor stopped after repeated failures")
)
