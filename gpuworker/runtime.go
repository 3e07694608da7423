package gpuworker

import "github.com/gpuarena/gpuarena/gpuworker/internal/pinned"

// The GPU thread's runtime lives in the internal package pinned; these are
// the parts of it gpuworker's callers see.

// DefaultThroughput is the number of messages the GPU actor handles in a row
// before its thread yields its P (protoactor-go's Throughput; WithThroughput).
const DefaultThroughput = pinned.DefaultThroughput

// DefaultSpin is the spin a worker runs with unless WithSpin says otherwise:
// after a request from a polling caller the GPU thread polls for the next
// one for up to 20 µs before it parks, and a caller alone in the mailbox
// polls for its reply at least as long, so a round trip costs no thread
// wake-up on either side. Chosen by measurement (docs/performance.md).
const DefaultSpin = pinned.DefaultSpin

// DefaultBusyPoll bounds how long a caller alone in the GPU actor's mailbox
// polls for its reply, while the GPU thread is awake, before it parks: 10
// ms, which covers driver calls of tens of microseconds to milliseconds (a
// large pool's allocation, a discrete arena's). A forward step's caller
// polls for the spin only: a step runs the embedder's code for an unknown
// time.
const DefaultBusyPoll = pinned.DefaultBusyPoll

// ThreadID returns the id of the calling thread as the worker records the
// GPU thread's (device.Stats.ThreadIDs) and HostSim records its
// callers' (HostSim.Threads): the OS thread id (gettid) on Linux; elsewhere
// an id of the calling goroutine, which names its thread as well for a
// goroutine locked to it (runtime.LockOSThread), as the GPU thread is.
func ThreadID() int { return pinned.ThreadID() }
