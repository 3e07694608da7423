// Package messages holds every message that crosses an actor boundary in
// gpuarena, and its reply: the requests the GPU actor (package gpuworker)
// and the arena, slab and release supervisors (package actors) answer. It is
// internal: an embedder meets the values these messages carry (package
// device), never the messages.
//
// A request carries its own reply channel, buffered with room for exactly one
// reply, so the actor that answers never blocks on a caller that has gone
// away. Callers wait on that channel together with their context.Context and
// the manager's done channel, so nothing waits forever after Close.
//
// Every request carries the caller's context. The actor checks it before it
// starts the work and never in the middle: a request whose context is already
// done is answered with the context's error and does nothing, and work that
// has started always finishes, its allocations recorded in the ledger under
// the request's owner so that releasing the owner frees them.
package messages
