package gpuworker

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// PinnedDispatcher runs the GPU actor, and every function scheduled on it,
// on one goroutine locked to one OS thread (runtime.LockOSThread): every
// backend call, and the CUDA context that is current there, stays on that
// thread. It is a protoactor-go actor.Dispatcher; the GPU actor is spawned
// on it with the pinned mailbox, which its goroutine reads directly (no
// function is scheduled per run of the mailbox, as protoactor-go's default
// mailbox does).
//
// When there is nothing to do the goroutine may spin (poll for work for a
// bounded time) before it parks; see NewPinnedDispatcher and DefaultSpin.
//
// Stop is idempotent and returns only when the goroutine has exited. The
// goroutine never unlocks its thread, so the thread exits with it and no
// other goroutine ever runs on a thread where a CUDA context was current.
type PinnedDispatcher struct {
	funcs   *mpscQueue // functions from Schedule
	mailbox atomic.Pointer[pinnedMailbox]
	wake    chan struct{} // a token: the goroutine is parked in the scheduler and there is work
	// policy says how the goroutine parks: by GOMAXPROCS, read each time it
	// parks (parkByProcs), or always one way (tests).
	policy     parkPolicy
	stop       chan struct{}
	exited     chan struct{}
	stopOnce   sync.Once
	throughput int
	spin       time.Duration

	// parked is parkedInScheduler or parkedInKernel while the goroutine is
	// parked (or about to), saying how to wake it, and stays so until the
	// goroutine runs again, except that notify clears it when it wakes a
	// goroutine parked in the kernel (which needs no P but its own). Every
	// post reads it; the goroutine writes it when it parks. hot is set by a
	// caller that polls for its reply and consumed by the next spin: the
	// goroutine spins only when a caller is polling, so a spin never keeps a
	// parked caller off its P. parked, idle, inKernel and procs share a cache
	// line, which the goroutine writes only when it parks; hot has its own.
	_      cpu.CacheLinePad
	parked atomic.Uint32
	// idle is true from when the goroutine starts to park until it runs
	// again; inKernel says whether its last park was in futex(2). Only the
	// goroutine writes them (worthPolling).
	idle     atomic.Bool
	inKernel atomic.Bool
	// procs is GOMAXPROCS as the goroutine last read it: when it started and
	// each time it parked (GOMAXPROCS can change while the process runs: by
	// runtime.GOMAXPROCS, or by the runtime itself when the container's CPU
	// limit changes). Callers read it to decide whether to poll (polls).
	procs atomic.Int32
	_     cpu.CacheLinePad
	hot   atomic.Bool
	// expected is when (d.epoch + expected) the goroutine stops spinning for
	// a request announced by expect; 0: none announced.
	_        cpu.CacheLinePad
	expected atomic.Int64
	epoch    time.Time

	// running is true while the goroutine handles messages or runs
	// functions; tid is the pinned thread's id. Together they tell a caller
	// that it is running on the pinned goroutine (onPinnedThread). Both are
	// written by the goroutine.
	_       cpu.CacheLinePad
	running atomic.Bool
	tid     atomic.Int64

	// onNewThread, when set, runs on a goroutine that takes over from one
	// that runtime.Goexit ended (run), before it does any work: the GPU actor
	// makes the backend's context current on the new thread there. It is
	// set on the pinned goroutine, before any takeover. takeovers counts
	// them.
	onNewThread func()
	takeovers   atomic.Int64

	// threads holds the OS thread ids the goroutine has run on, read when it
	// starts and each time before it parks (a park is the only point where
	// the runtime could move an unlocked goroutine: each id read before one
	// is the thread that ran the work since the last). It is read and
	// written on the pinned goroutine only.
	threads map[int]struct{}
}

var _ actor.Dispatcher = (*PinnedDispatcher)(nil)

// DefaultThroughput is the number of messages the GPU actor handles in a
// row before its goroutine yields its P and checks for Stop (protoactor-go's
// Throughput).
const DefaultThroughput = 300

// DefaultSpin is the spin the GPU worker's dispatcher uses unless WithSpin
// says otherwise: after handling a request from a polling caller, the pinned
// goroutine polls for the next one for up to 20 µs before it parks, and a
// caller alone in the mailbox polls for its reply at least as long
// (pollReply), so a round trip costs no thread wake-up on either side.
//
// Chosen by measurement (docs/performance.md, 2026-11-30). A spin alone does
// not pay while callers park for their replies: the reply makes the caller
// runnable on the P the spinning thread holds, where it waits for the spin to
// end. On an H200 host (16 vCPUs, cuda backend) one client's empty round
// trip had a p50 of 21 µs with no spin and 40 µs with a 20 µs spin alone;
// with the 20 µs spin, polling callers and the pinned mailbox it has a p50 of
// 1.3 to 1.9 µs and a p99 of 5 to 9 µs, and 256 clients reach 1.3 to 1.6
// times one client's throughput. WithSpin(0) turns both off.
const DefaultSpin = 20 * time.Microsecond

// pollsPerCheck is how many empty polls a spinning goroutine makes between
// two reads of the clock and of the stop channel: an empty poll costs a few
// nanoseconds, a clock read tens.
const pollsPerCheck = 64

// NewPinnedDispatcher starts the pinned goroutine. throughput ≤ 0 means
// DefaultThroughput. spin is how long the goroutine polls for new work
// before it parks (0: park at once); a spinning thread holds one CPU, so
// keep it to microseconds.
func NewPinnedDispatcher(throughput int, spin time.Duration) *PinnedDispatcher {
	return newPinnedDispatcher(throughput, spin, parkByProcs)
}

// parkPolicy says how the pinned goroutine parks.
type parkPolicy uint8

const (
	// parkByProcs parks in futex(2) when GOMAXPROCS, read at each park, is
	// at least parkInKernelFromProcs, and in the Go scheduler otherwise.
	parkByProcs parkPolicy = iota
	// parkAlwaysInScheduler and parkAlwaysInKernel park one way whatever
	// GOMAXPROCS is (tests of each mode).
	parkAlwaysInScheduler
	parkAlwaysInKernel
)

// The values of PinnedDispatcher.parked.
const (
	notParked         uint32 = iota
	parkedInScheduler        // woken by a token on wake
	parkedInKernel           // woken by futexWake
)

func newPinnedDispatcher(throughput int, spin time.Duration, policy parkPolicy) *PinnedDispatcher {
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	d := &PinnedDispatcher{
		funcs:      newMPSCQueue(),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		exited:     make(chan struct{}),
		throughput: throughput,
		spin:       spin,
		policy:     policy,
		epoch:      time.Now(),
		threads:    make(map[int]struct{}, 1),
	}
	d.procs.Store(int32(runtime.GOMAXPROCS(0)))
	go d.run(false)
	return d
}

// attach makes m the mailbox the goroutine reads (pinnedMailbox.RegisterHandlers).
func (d *PinnedDispatcher) attach(m *pinnedMailbox) {
	if !d.mailbox.CompareAndSwap(nil, m) {
		panic("gpuworker: a PinnedDispatcher runs one pinned mailbox; spawn one actor on it")
	}
}

// run is the pinned goroutine's loop. takeover is true when it takes over
// from a goroutine that runtime.Goexit ended in the middle of its work (a
// forward step calling t.FailNow, a backend calling Goexit): that goroutine's
// deferred function starts this one on a fresh locked thread, which runs
// onNewThread first and then goes on with the work, the mailbox and its
// queues intact. The thread the other goroutine had locked ends with it, as
// it would at Stop.
func (d *PinnedDispatcher) run(takeover bool) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	returned := false
	defer func() {
		if returned {
			close(d.exited)
			return
		}
		// runtime.Goexit: a panic never gets here, since the mailbox recovers
		// its handlers' panics, and one in a scheduled function ends the
		// program. The queues are single-consumer: the next goroutine is
		// their consumer from here on (the go statement orders it after
		// everything this one did).
		d.running.Store(false)
		d.takeovers.Add(1)
		go d.run(true)
	}()
	d.tid.Store(int64(unix.Gettid()))
	d.recordThread()
	if takeover && d.onNewThread != nil {
		d.onNewThread()
	}
	for {
		select {
		case <-d.stop:
			returned = true
			return
		default:
		}
		if d.work() || d.poll() {
			continue
		}
		// Record the thread before parking rather than after: the system
		// call stays off the path from a wake-up to the request.
		d.recordThread()
		if !d.park() {
			returned = true
			return
		}
	}
}

// work runs the scheduled functions and up to throughput messages of the
// mailbox, and reports whether there was anything to do. After throughput
// messages in a row it yields its P (runtime.Gosched), as protoactor-go's
// mailbox does, so that the callers its replies made runnable there run.
func (d *PinnedDispatcher) work() bool {
	if !d.pending() {
		return false
	}
	d.running.Store(true)
	for {
		fn, ok := d.funcs.pop()
		if !ok {
			break
		}
		fn.(func())()
	}
	if m := d.mailbox.Load(); m != nil && m.run(d.throughput) == d.throughput {
		runtime.Gosched()
	}
	d.running.Store(false)
	return true
}

// pending reports whether work would find anything to do.
func (d *PinnedDispatcher) pending() bool {
	m := d.mailbox.Load()
	return !d.funcs.empty() || (m != nil && m.pending())
}

// onPinnedThread reports whether the caller runs on the pinned goroutine,
// i.e. inside a message handler (a forward step). Only while one runs does
// it cost a gettid: a locked thread runs no other goroutine, so the thread
// id identifies the goroutine.
func (d *PinnedDispatcher) onPinnedThread() bool {
	return d.running.Load() && int64(unix.Gettid()) == d.tid.Load()
}

// recordThread records the OS thread the goroutine runs on (a gettid system
// call: cheap next to a wake-up from parking, not next to a spun hand-off,
// so it is made once per park rather than once per message).
func (d *PinnedDispatcher) recordThread() { d.threads[unix.Gettid()] = struct{}{} }

// poll spins waiting for work, without parking: for up to d.spin when a
// caller has polled since the last spin, and until the end of the window of
// a request announced by expect. It reports false when it did not spin, the
// spin ran out, or Stop was called.
func (d *PinnedDispatcher) poll() bool {
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

// parkInKernelFromProcs is the GOMAXPROCS from which the goroutine parks in
// futex(2) rather than in the Go scheduler.
//
// Woken through a channel, a parked locked goroutine is queued on its
// waker's P, then handed a P through a second thread wake-up; a caller that
// polls for its reply on that P holds it meanwhile. Woken from futex, the
// thread returns from a system call on the P it kept: one wake-up, and no
// other P involved (on the H200 host, from a request to a parked GPU thread
// to the start of its handling: median 29 µs, against 86 µs through the
// scheduler; docs/performance.md). But a P kept by a thread asleep in a
// system call is lost to the rest of the program until the runtime takes it
// back (after 20 µs to 10 ms): with 2 Ps that stalled builds for
// milliseconds, with 16 it is not missed.
const parkInKernelFromProcs = 4

// park waits until there is work (true) or Stop was called (false), in
// futex(2) or in the Go scheduler as the policy and GOMAXPROCS say.
//
// The goroutine sets parked before it looks for work one last time, and a
// producer queues its work before it reads parked (notify): either the
// goroutine sees the work, or the producer sees it parked, and how, and wakes
// it that way. A wake-up that was not needed only makes the next park return
// at once.
func (d *PinnedDispatcher) park() bool {
	procs := runtime.GOMAXPROCS(0)
	d.procs.Store(int32(procs))
	mode := parkedInScheduler
	if d.policy == parkAlwaysInKernel || (d.policy == parkByProcs && procs >= parkInKernelFromProcs) {
		mode = parkedInKernel
	}
	d.inKernel.Store(mode == parkedInKernel)
	d.idle.Store(true)
	defer d.idle.Store(false)
	for {
		d.parked.Store(mode)
		if d.pending() {
			d.parked.Store(notParked)
			return true
		}
		if mode == parkedInScheduler {
			select {
			case <-d.wake:
				d.parked.Store(notParked)
				return true
			case <-d.stop:
				d.parked.Store(notParked)
				return false
			}
		}
		select {
		case <-d.stop:
			d.parked.Store(notParked)
			return false
		default:
		}
		futexWait(&d.parked, parkedInKernel)
		if d.parked.Load() == notParked {
			return true // notify cleared it
		}
	}
}

// notify wakes the goroutine if it is parked, the way it parked; call it
// after queueing work.
func (d *PinnedDispatcher) notify() {
	switch d.parked.Load() {
	case parkedInKernel:
		if d.parked.CompareAndSwap(parkedInKernel, notParked) {
			futexWake(&d.parked)
		}
	case parkedInScheduler:
		select {
		case d.wake <- struct{}{}:
		default: // a token is there already
		}
	}
}

// polls reports whether a caller may poll for its reply, holding its P: only
// when there is a P left for the GPU thread (GOMAXPROCS > 1, as last read)
// and the dispatcher spins at all.
func (d *PinnedDispatcher) polls() bool { return d.spin > 0 && d.procs.Load() > 1 }

// wakeGrace is how long after its request a caller keeps polling for a GPU
// thread that was woken from futex(2) and has not run yet. On the H200 host
// that wake-up took 10–60 µs three times in four, and 150–400 µs otherwise
// (the thread's vCPU asleep in the host, after as little as a few
// microseconds parked; docs/performance.md); a caller that gave up and
// parked then paid a second wake-up of the same kind for its reply. A thread
// woken through the scheduler may need the caller's own P, so its caller
// gets no grace.
const wakeGrace = time.Millisecond

// worthPolling reports whether a caller that sent its request waited ago
// should keep polling for the reply, holding its P: while the goroutine is
// awake (it runs on a P of its own), and for wakeGrace while one woken from
// futex(2) returns to its P.
func (d *PinnedDispatcher) worthPolling(waited time.Duration) bool {
	return !d.idle.Load() || (d.inKernel.Load() && waited < wakeGrace)
}

// expectWindow is how long the goroutine spins for a request announced by
// expect: the hop through a supervisor takes 5 to 30 µs on the H200 host.
const expectWindow = 100 * time.Microsecond

// expect tells the goroutine that a request will come within microseconds
// (expectWindow): it spins for it rather than parking, and a parked
// goroutine is woken now, so that its wake-up overlaps the caller's work
// before the request instead of following it.
func (d *PinnedDispatcher) expect() {
	d.expected.Store(int64(time.Since(d.epoch) + expectWindow))
	d.notify()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Schedule runs fn on the pinned goroutine, after the functions scheduled
// before it (actor.Dispatcher; the GPU actor's own messages go through its
// pinned mailbox instead). After Stop fn is never run. A panic in fn is not
// recovered: a mailbox recovers its handlers' panics itself, as
// protoactor-go's do.
func (d *PinnedDispatcher) Schedule(fn func()) {
	d.funcs.push(fn)
	d.notify()
}

// Throughput is the number of messages handled in a row before the
// goroutine yields its P and checks for Stop.
func (d *PinnedDispatcher) Throughput() int { return d.throughput }

// Stop ends the pinned goroutine and waits until it has exited. Functions
// and messages still queued are not run.
func (d *PinnedDispatcher) Stop() {
	d.stopOnce.Do(func() {
		close(d.stop)
		d.notify()
	})
	<-d.exited
}

// stopSoon asks the goroutine to end once it is done with the work at hand,
// without waiting for it: the GPU actor calls it from its own Stopped
// handler, on the pinned goroutine.
func (d *PinnedDispatcher) stopSoon() { d.stopOnce.Do(func() { close(d.stop) }) }

// threadIDs returns the thread ids that ran the goroutine's work. Call it
// only from a function running on the dispatcher.
func (d *PinnedDispatcher) threadIDs() []int {
	ids := make([]int, 0, len(d.threads))
	for id := range d.threads {
		ids = append(ids, id)
	}
	return ids
}
