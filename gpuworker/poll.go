package gpuworker

import "time"

// DefaultBusyPoll bounds how long a caller alone in the GPU actor's mailbox
// polls for its reply, while the GPU thread is awake, before it parks: the
// spin covers a request the GPU thread answers at once; this covers driver
// calls that take tens of microseconds to milliseconds (cuMemAlloc of a
// large pool; the 39 allocations of a discrete arena took 1.0–1.5 ms on the
// H200 host). Past it the caller parks, and the reply wakes it.
//
// A parked caller costs a thread wake-up, 30 to 150 µs on the H200 host when
// it had been polling (docs/performance.md): past 10 ms that is at most
// 1.5% of the call. The poller holds its P, so polling is off when the GPU
// thread could not have one of its own (GOMAXPROCS 1); only a caller alone
// in the mailbox polls, and only while the GPU thread is awake. A forward
// step runs the embedder's code for an unknown time: its caller polls for
// the spin only.
const DefaultBusyPoll = 10 * time.Millisecond

// pollReply polls reply without parking or yielding: for up to spin, then,
// while g says it is worth it, up to busyFor in all. It reports false when
// no reply came in that time, or as soon as cancel or exited is closed (the
// caller's context is done, the worker has stopped).
func pollReply[R any](reply <-chan R, cancel, exited <-chan struct{}, spin, busyFor time.Duration, g interface {
	worthPolling(waited time.Duration) bool
}) (R, bool) {
	start := time.Now()
	for {
		for range pollsPerCheck {
			select {
			case r := <-reply:
				return r, true
			default:
			}
		}
		select {
		case <-cancel:
			var zero R
			return zero, false
		case <-exited:
			var zero R
			return zero, false
		default:
		}
		if waited := time.Since(start); waited >= spin && (waited >= busyFor || !g.worthPolling(waited)) {
			var zero R
			return zero, false
		}
	}
}
