// Package gpuworker owns the GPU. One goroutine, locked to one OS thread with
// runtime.LockOSThread, makes every backend call: it runs the GPU actor, a
// protoactor-go actor spawned on a PinnedDispatcher. Everything else sends the
// actor messages (package messages).
//
// The package holds the Backend interface and its implementations (hostsim,
// the default pure-Go simulated device, and cuda behind the build tag cuda),
// the pinned dispatcher, the GPU actor and its allocation ledger.
package gpuworker
