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

// pollReply polls reply without parking or yielding for up to poll, and
// reports false when no reply came in that time.
func pollReply[R any](reply <-chan R, poll time.Duration) (R, bool) {
	start := time.Now()
	for {
		for range pollsPerCheck {
			select {
			case r := <-reply:
				return r, true
			default:
			}
		}
		if time.Since(start) >= poll {
			var zero R
			return zero, false
		}
	}
}
