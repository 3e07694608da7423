// Package actors holds the supervisors that message the GPU actor: the arena
// supervisor (builds the arena in one all-or-nothing batch and runs forward
// steps on it, one at a time), the slab supervisor (creates slabs and carves
// them bump-only, one carve at a time) and the release supervisor (frees every
// registered resource, exhaustively and idempotently).
//
// Each supervisor is a protoactor-go actor: its mailbox, not a lock or an
// atomic, serialises the work it guards. The supervisors hold no device
// memory of their own; the GPU actor's ledger is the single source of truth.
package actors
