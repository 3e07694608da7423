package gpuworker

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"
)

// PinnedDispatcher is a protoactor-go actor.Dispatcher that runs every
// scheduled function on one goroutine locked to one OS thread
// (runtime.LockOSThread). The GPU actor is spawned on it, so every backend
// call, and the CUDA context that is current there, stays on that thread.
//
// Between two functions the goroutine may spin (poll for the next one for a
// bounded time) before it parks; see NewPinnedDispatcher and DefaultSpin.
//
// Stop is idempotent and returns only when the goroutine has exited. The
// goroutine never unlocks its thread, so the thread exits with it and no
// other goroutine ever runs on a thread where a CUDA context was current.
type PinnedDispatcher struct {
	work       chan func()
	stop       chan struct{}
	exited     chan struct{}
	stopOnce   sync.Once
	throughput int
	spin       time.Duration

	// parked is true while the goroutine waits in park. hot is set by a
	// caller that polls for its reply (pollReply) and consumed by the next
	// spin: the goroutine spins only when a caller is polling, so a spin never
	// keeps a parked caller off its P.
	parked atomic.Bool
	hot    atomic.Bool

	// running is true while a scheduled function runs; tid is the pinned
	// thread's id. Together they tell a caller that it is running on the
	// pinned goroutine (onPinnedThread).
	running atomic.Bool
	tid     atomic.Int64

	// threads holds the OS thread ids the goroutine has run on, read when it
	// starts and each time it wakes from parking (the only points where the
	// runtime could have moved an unlocked goroutine). It is read and written
	// on the pinned goroutine only.
	threads map[int]struct{}
}

var _ actor.Dispatcher = (*PinnedDispatcher)(nil)

// DefaultThroughput is the number of messages the GPU actor handles per
// scheduling before the mailbox yields (protoactor-go's Throughput).
const DefaultThroughput = 300

// DefaultSpin is the spin the GPU worker's dispatcher uses unless WithSpin
// says otherwise: after a function returns, the pinned goroutine polls for
// the next one for up to 20 µs before it parks, and a caller whose request is
// alone in the mailbox polls for its reply for as long (pollReply), so a
// round trip costs no thread wake-up on either side.
//
// Chosen by measurement (docs/performance.md, 2026-11-30). A spin alone does
// not pay while callers park for their replies: the reply makes the caller
// runnable on the P the spinning thread holds, where it waits for the spin to
// end. On an H200 host (16 vCPUs, cuda backend) one client's empty round
// trip had a p50 of 19 µs with no spin and 40 µs with a 20 µs spin alone;
// with the 20 µs spin and polling callers it had a p50 of 0.7 to 2.5 µs and a
// p99 of 5 to 8 µs, and 256 clients reached 1.7 times one client's
// throughput. WithSpin(0) turns both off.
const DefaultSpin = 20 * time.Microsecond

// pollsPerCheck is how many empty polls of the work channel a spinning
// goroutine makes between two reads of the clock and of the stop channel: an
// empty poll costs a few nanoseconds, a clock read tens.
const pollsPerCheck = 64

// NewPinnedDispatcher starts the pinned goroutine. throughput ≤ 0 means
// DefaultThroughput. spin is how long the goroutine polls for new work after
// a function returns before it parks (0: park at once); a spinning thread
// holds one CPU, so keep it to microseconds.
func NewPinnedDispatcher(throughput int, spin time.Duration) *PinnedDispatcher {
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	d := &PinnedDispatcher{
		// The mailbox schedules at most one run at a time; the buffer only
		// keeps Schedule from blocking while the previous run winds down.
		work:       make(chan func(), 4),
		stop:       make(chan struct{}),
		exited:     make(chan struct{}),
		throughput: throughput,
		spin:       spin,
		threads:    make(map[int]struct{}, 1),
	}
	go d.run()
	return d
}

func (d *PinnedDispatcher) run() {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	defer close(d.exited)
	d.tid.Store(int64(unix.Gettid()))
	d.recordThread()
	for {
		fn, ok := d.poll()
		if !ok {
			d.parked.Store(true)
			fn, ok = d.park()
			d.parked.Store(false)
			if !ok {
				return
			}
			d.recordThread()
		}
		d.running.Store(true)
		fn()
		d.running.Store(false)
	}
}

// onPinnedThread reports whether the caller runs on the pinned goroutine,
// i.e. inside a function it is running (a forward step). Only while one runs
// does it cost a gettid: a locked thread runs no other goroutine, so the
// thread id identifies the goroutine.
func (d *PinnedDispatcher) onPinnedThread() bool {
	return d.running.Load() && int64(unix.Gettid()) == d.tid.Load()
}

// recordThread records the OS thread the goroutine runs on (a gettid system
// call: cheap next to a wake-up from parking, not next to a spun hand-off,
// so it is made once per wake-up rather than once per function).
func (d *PinnedDispatcher) recordThread() { d.threads[unix.Gettid()] = struct{}{} }

// poll spins for up to d.spin waiting for the next function, without
// parking, when a caller has polled since the last spin. It reports false
// when it did not spin, the spin ran out, or Stop was called.
func (d *PinnedDispatcher) poll() (func(), bool) {
	if d.spin <= 0 || !d.hot.Swap(false) {
		return nil, false
	}
	deadline := time.Now().Add(d.spin)
	for {
		for range pollsPerCheck {
			select {
			case fn := <-d.work:
				return fn, true
			default:
			}
		}
		select {
		case <-d.stop:
			return nil, false
		default:
		}
		if !time.Now().Before(deadline) {
			return nil, false
		}
	}
}

// park waits for the next function; false after Stop.
func (d *PinnedDispatcher) park() (func(), bool) {
	select {
	case fn := <-d.work:
		return fn, true
	case <-d.stop:
		return nil, false
	}
}

// Schedule hands fn to the pinned goroutine. After Stop fn is never run.
//
// It tries a plain send first: a select over two channels locks both, and
// the lock on work, which the spinning goroutine polls, then convoys. On the
// 2-vCPU development VM that alone took one client's empty round trip from a
// p50 of 0.58 µs to 2.8 µs in about half of the runs (docs/performance.md).
func (d *PinnedDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
		return
	default:
	}
	select {
	case d.work <- fn:
	case <-d.stop:
	}
}

// expect tells the pinned goroutine that a request will come within
// microseconds: it spins for it rather than parking, and a parked goroutine
// is woken now, so that its wake-up overlaps the caller's work before the
// request instead of following it.
func (d *PinnedDispatcher) expect() {
	d.hot.Store(true)
	if d.parked.Load() {
		select {
		case d.work <- func() {}:
		default: // work is queued: the goroutine is waking anyway
		}
	}
}

// Throughput is the number of messages handled per scheduling.
func (d *PinnedDispatcher) Throughput() int { return d.throughput }

// Stop ends the pinned goroutine and waits until it has exited. Functions
// still queued are not run.
func (d *PinnedDispatcher) Stop() {
	d.stopOnce.Do(func() { close(d.stop) })
	<-d.exited
}

// threadIDs returns the thread ids that ran scheduled functions. Call it only
// from a function running on the dispatcher.
func (d *PinnedDispatcher) threadIDs() []int {
	ids := make([]int, 0, len(d.threads))
	for id := range d.threads {
		ids = append(ids, id)
	}
	return ids
}
