package gpuworker

import "time"

// DefaultBusyPoll bounds how long a caller alone in the GPU actor's mailbox
// polls for its reply before it parks: the spin covers a request the GPU
// thread answers at once; this covers a driver call (cuMemAlloc of a large
// pool, cuMemFree of it) that takes tens to hundreds of microseconds, and the
// wake-up of a parked GPU thread. Past it the caller parks, and the reply
// wakes it.
//
// A parked caller costs a thread wake-up per request, 10 to 60 µs on the
// development VM and on the H200 host (docs/performance.md); past 1 ms that
// is under 5% of the call. The poller holds its P, so polling is off when the
// GPU thread could not have one of its own (GOMAXPROCS 1), and only a caller
// alone in the mailbox polls. A forward step runs the embedder's code for an
// unknown time: its caller polls for the spin only.
const DefaultBusyPoll = time.Millisecond

// pollReply polls reply without parking or yielding: for up to spin, then,
// while g is awake (running, spinning or waking on a P of its own), up to
// busyFor in all. It reports false when no reply came in that time.
//
// A parked GPU thread woken through the Go scheduler waits for a P, maybe
// this goroutine's (a woken goroutine is queued on its waker's P): past the
// spin the poller parks then, so that its P can run the GPU thread.
func pollReply[R any](reply <-chan R, spin, busyFor time.Duration, g interface{ awake() bool }) (R, bool) {
	start := time.Now()
	for {
		for range pollsPerCheck {
			select {
			case r := <-reply:
				return r, true
			default:
			}
		}
		if waited := time.Since(start); waited >= spin && (waited >= busyFor || !g.awake()) {
			var zero R
			return zero, false
		}
	}
}
