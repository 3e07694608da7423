// Package actors holds the supervisors that message the GPU actor: the arena
// supervisor (builds the arena in one all-or-nothing batch and runs forward
// steps on it, one at a time), the slab supervisor (carves the slabs
// bump-only, one carve at a time) and the release supervisor (frees every
// registered resource, exhaustively and idempotently).
//
// Each supervisor is a protoactor-go actor: its mailbox, not a lock or an
// atomic, serialises the work it guards. The supervisors hold no device
// memory of their own; the GPU actor's ledger is the single source of truth.
//
// Supervision. The three are children of one parent actor whose strategy is
// RestartStrategy (one for one, restart). A panic while a supervisor handles a
// request is answered to its caller as ErrSupervisorPanic, and the supervisor
// is restarted; the new one rebuilds its state from the ledger on
// *actor.Started (rebuild.go): the built arena is what its allocations are
// tagged with, each carve is a view of its slab, the release
// is a retired owner. So a restart loses nothing and a slab never hands out
// bytes twice. The GPU actor itself is never restarted (gpuworker.Start).
package actors
