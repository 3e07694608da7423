package pinned

import "time"

// DefaultSpin is the spin gpuworker's dispatcher is made with unless told
// otherwise: after handling a request from a polling caller, the pinned
// goroutine polls for the next one for up to 20 µs before it parks, and a
// caller alone in the mailbox polls for its reply at least as long
// (SendAndPoll), so a round trip costs no thread wake-up on either side.
//
// Chosen by measurement (docs/performance.md). A spin alone does not pay
// while callers park for their replies: the reply makes the caller runnable
// on the P the spinning thread holds, where it waits for the spin to end. It
// pays with polling callers and the pinned mailbox together. A spin of 0
// turns both off.
const DefaultSpin = 20 * time.Microsecond

// pollsPerCheck is how many empty polls a spinning goroutine makes between
// two reads of the clock and of the stop channel: an empty poll costs a few
// nanoseconds, a clock read tens.
const pollsPerCheck = 64

// expectWindow is how long the goroutine spins for a request announced by
// Expect: long enough for a request to come through one or two other actors
// (the hop through a supervisor; docs/performance.md).
const expectWindow = 100 * time.Microsecond

// poll spins waiting for work, without parking: for up to d.spin when a
// caller has polled since the last spin, and until the end of the window of
// a request announced by Expect. It reports false when it did not spin, the
// spin ran out, or Stop was called.
func (d *Dispatcher) poll() bool {
	if d.spin <= 0 {
		return false
	}
	now := time.Now()
	deadline := now
	if d.hot.Swap(false) {
		deadline = now.Add(d.spin)
	}
	for {
		if e := d.expected.Swap(0); e != 0 {
			deadline = later(deadline, d.epoch.Add(time.Duration(e)))
		}
		if !now.Before(deadline) {
			return false
		}
		for range pollsPerCheck {
			if d.pending() {
				return true
			}
		}
		select {
		case <-d.stop:
			return false
		default:
		}
		now = time.Now()
	}
}

// polls reports whether a caller may poll for its reply, holding its P: only
// when there is a P left for the pinned goroutine (GOMAXPROCS > 1, as last
// read) and the dispatcher spins at all.
func (d *Dispatcher) polls() bool { return d.spin > 0 && d.procs.Load() > 1 }

// Expect tells the goroutine that a request will come within microseconds,
// through another actor (expectWindow): it spins for it rather than parking,
// and a parked goroutine is woken now, so that its wake-up overlaps the hop
// instead of following it. It costs an atomic store when the goroutine is
// awake, and does nothing when callers do not poll (a spin of 0, or
// GOMAXPROCS 1 as the goroutine last read it: a spinning goroutine would
// hold the only P). It may be called from any goroutine, the pinned one
// included (from a handler whose reply leads to the next request).
func (d *Dispatcher) Expect() {
	if !d.polls() {
		return
	}
	d.expected.Store(int64(time.Since(d.epoch) + expectWindow))
	d.notify()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
