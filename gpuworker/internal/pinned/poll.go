package pinned

import "time"

// DefaultBusyPoll bounds how long a caller alone in the mailbox polls for
// its reply, while the pinned goroutine is awake, before it parks: the spin
// covers a request answered at once; this covers requests that take tens of
// microseconds to milliseconds (a device driver's allocation of a large
// pool, the allocations of a discrete arena; docs/performance.md). Past it
// the caller parks, and the reply wakes it.
//
// A parked caller costs a thread wake-up (docs/performance.md), a small
// fraction of a call past 10 ms. The poller holds its P, so polling is off
// when the pinned goroutine could not have one of its own (GOMAXPROCS 1);
// only a caller alone in the mailbox polls, and only while the goroutine is
// awake. A request that runs code of unknown length polls for the spin only
// (a busy poll of 0).
const DefaultBusyPoll = 10 * time.Millisecond

// wakeGrace is how long after its request a caller keeps polling for a
// pinned goroutine that was woken from futex(2) and has not run yet. Such a
// wake-up is slow now and then (the thread's vCPU asleep in the host, after
// as little as a few microseconds parked; docs/performance.md), and a caller
// that gave up and parked then paid a second wake-up of the same kind for
// its reply. A goroutine woken through the scheduler may need the caller's
// own P, so its caller gets no grace.
const wakeGrace = time.Millisecond

// worthPolling reports whether a caller that sent its request waited ago
// should keep polling for the reply, holding its P: while the goroutine is
// awake (it runs on a P of its own), and for wakeGrace while one woken from
// futex(2) returns to its P.
func (d *Dispatcher) worthPolling(waited time.Duration) bool {
	return !d.idle.Load() || (d.inKernel.Load() && waited < wakeGrace)
}

// SendAndPoll sends a request to the pinned actor with send and, when the
// caller may, polls reply for its answer without parking or yielding: for
// the spin, then, while the goroutine is awake, up to busy in all. It
// returns the reply and true, or false when the caller is to wait for the
// reply by blocking: it did not poll, no reply came in that time, or cancel
// or gone closed (the caller's context is done, the actor has stopped).
//
// A caller polls only when the dispatcher polls at all (a spin, and a P left
// for the goroutine), only when it is alone in the mailbox (the others queue
// behind it and park), and only one at a time. It marks the dispatcher hot
// first, so that the goroutine spins for the next request after this one
// rather than parking.
func SendAndPoll[R any](d *Dispatcher, send func(), reply <-chan R, cancel, gone <-chan struct{}, busy time.Duration) (R, bool) {
	if !d.polls() || d.Queued() != 0 || !d.poller.CompareAndSwap(false, true) {
		send()
		var zero R
		return zero, false
	}
	defer d.poller.Store(false)
	d.hot.Store(true)
	send()
	return pollReply(reply, cancel, gone, d.spin, busy, d)
}

// pollReply polls reply without parking or yielding: for up to spin, then,
// while g says it is worth it, up to busyFor in all. It reports false when
// no reply came in that time, or as soon as cancel or gone is closed.
func pollReply[R any](reply <-chan R, cancel, gone <-chan struct{}, spin, busyFor time.Duration, g interface {
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
		case <-gone:
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
