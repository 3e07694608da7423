// Package pinned is the GPU worker's thread runtime: a protoactor-go
// dispatcher whose one goroutine is locked to one OS thread (Dispatcher), the
// actor mailbox that goroutine reads itself (NewMailbox), the lock-free queue
// under both, how the goroutine spins for work and parks (in futex(2) on
// Linux, in the Go scheduler elsewhere), and how a caller polls for its reply
// (SendAndPoll).
//
// It knows nothing of devices: package gpuworker runs its GPU actor on it.
// The measurements behind its constants are in docs/performance.md.
package pinned
