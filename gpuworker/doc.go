// Package gpuworker owns the GPU. One goroutine, locked to one OS thread with
// runtime.LockOSThread, makes every backend call: it runs the GPU actor, a
// protoactor-go actor spawned on a pinned dispatcher (the internal package
// pinned: the dispatcher, its mailbox, and how the thread and its callers
// spin, park and poll). Everything else sends the actor messages (gpuarena's
// internal package messages), through the Worker's typed calls. The values
// those calls take and return — pointers, the forward step's Device, the
// ledger, the stats — are package device's.
//
// The package holds the Backend interface, the registry of backends
// (Register; hostsim, the default pure-Go simulated device, and cuda behind
// the build tag cuda, register themselves), the fault-injecting adaptor that
// wraps any backend (WithFaults), the GPU actor and its allocation ledger.
package gpuworker
