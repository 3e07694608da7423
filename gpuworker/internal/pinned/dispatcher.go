package pinned

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/cpu"
)

// Dispatcher runs one actor, and every function scheduled on it, on one
// goroutine locked to one OS thread (runtime.LockOSThread): every call the
// actor makes, and any per-thread state it relies on (a CUDA context), stays
// on that thread. It is a protoactor-go actor.Dispatcher; spawn the actor on
// it with NewMailbox, which its goroutine reads directly (no function is
// scheduled per run of the mailbox, as protoactor-go's default mailbox does).
//
// When there is nothing to do the goroutine may spin (poll for work for a
// bounded time) before it parks; see New and DefaultSpin.
//
// Stop is idempotent and returns only when the goroutine has exited. The
// goroutine never unlocks its thread, so the thread exits with it and no
// other goroutine ever runs on a thread the actor's state was bound to.
type Dispatcher struct {
	funcs   *mpscQueue // functions from Schedule
	mailbox atomic.Pointer[mailbox]
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
	// poller is held by the one caller polling for its reply now
	// (SendAndPoll): at most one holds a P that way.
	_      cpu.CacheLinePad
	poller atomic.Bool
	// expected is when (d.epoch + expected) the goroutine stops spinning for
	// a request announced by Expect; 0: none announced.
	_        cpu.CacheLinePad
	expected atomic.Int64
	epoch    time.Time

	// running is true while the goroutine handles messages or runs
	// functions; tid is the pinned thread's id (ThreadID). Together they
	// tell a caller that it is running on the pinned goroutine
	// (OnPinnedThread). Both are written by the goroutine.
	_       cpu.CacheLinePad
	running atomic.Bool
	tid     atomic.Int64

	// onTakeover, when set, runs on a goroutine that takes over from one
	// that runtime.Goexit ended (run), before it does any work. It is set on
	// the pinned goroutine (OnTakeover), before any takeover. takeovers
	// counts them.
	onTakeover func()
	takeovers  atomic.Int64

	// threads holds the thread ids the goroutine has run on, read when it
	// starts and each time before it parks (a park is the only point where
	// the runtime could move an unlocked goroutine: each id read before one
	// is the thread that ran the work since the last). It is read and
	// written on the pinned goroutine only.
	threads map[int]struct{}
}

var _ actor.Dispatcher = (*Dispatcher)(nil)

// DefaultThroughput is the number of messages the actor handles in a row
// before the goroutine yields its P and checks for Stop (protoactor-go's
// Throughput).
const DefaultThroughput = 300

// New starts the pinned goroutine. throughput ≤ 0 means DefaultThroughput.
// spin is how long the goroutine polls for new work before it parks, and a
// caller alone in the mailbox polls for its reply (0: both park at once); a
// spinning thread holds one CPU, so keep it to microseconds (DefaultSpin).
func New(throughput int, spin time.Duration) *Dispatcher {
	return newDispatcher(throughput, spin, parkByProcs)
}

func newDispatcher(throughput int, spin time.Duration, policy parkPolicy) *Dispatcher {
	if throughput <= 0 {
		throughput = DefaultThroughput
	}
	d := &Dispatcher{
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

// attach makes m the mailbox the goroutine reads (mailbox.RegisterHandlers).
func (d *Dispatcher) attach(m *mailbox) {
	if !d.mailbox.CompareAndSwap(nil, m) {
		panic("pinned: a Dispatcher runs one pinned mailbox; spawn one actor on it")
	}
}

// run is the pinned goroutine's loop. takeover is true when it takes over
// from a goroutine that runtime.Goexit ended in the middle of its work (a
// message handler or a backend calling t.FailNow or Goexit): that
// goroutine's deferred function starts this one on a fresh locked thread,
// which runs onTakeover first and then goes on with the work, the mailbox
// and its queues intact. The thread the other goroutine had locked ends with
// it, as it would at Stop.
func (d *Dispatcher) run(takeover bool) {
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
	d.tid.Store(int64(ThreadID()))
	d.recordThread()
	if takeover && d.onTakeover != nil {
		d.onTakeover()
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
		// Record the thread before parking rather than after: the thread id
		// read stays off the path from a wake-up to the request.
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
func (d *Dispatcher) work() bool {
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
func (d *Dispatcher) pending() bool {
	m := d.mailbox.Load()
	return !d.funcs.empty() || (m != nil && m.pending())
}

// OnPinnedThread reports whether the caller runs on the pinned goroutine,
// i.e. inside a message handler or a scheduled function. Only while one runs
// does it read the caller's thread id (ThreadID): a locked thread runs no
// other goroutine, so the thread id identifies the goroutine.
func (d *Dispatcher) OnPinnedThread() bool {
	return d.running.Load() && int64(ThreadID()) == d.tid.Load()
}

// recordThread records the thread the goroutine runs on (on Linux a gettid
// system call: cheap next to a wake-up from parking, not next to a spun
// hand-off, so it is made once per park rather than once per message).
func (d *Dispatcher) recordThread() { d.threads[ThreadID()] = struct{}{} }

// Schedule runs fn on the pinned goroutine, after the functions scheduled
// before it (actor.Dispatcher; the actor's own messages go through its
// pinned mailbox instead). After Stop fn is never run. A panic in fn is not
// recovered: a mailbox recovers its handlers' panics itself, as
// protoactor-go's do.
func (d *Dispatcher) Schedule(fn func()) {
	d.funcs.push(fn)
	d.notify()
}

// Throughput is the number of messages handled in a row before the
// goroutine yields its P and checks for Stop.
func (d *Dispatcher) Throughput() int { return d.throughput }

// Stop ends the pinned goroutine and waits until it has exited. Functions
// and messages still queued are not run.
func (d *Dispatcher) Stop() {
	d.stopOnce.Do(func() {
		close(d.stop)
		d.notify()
	})
	<-d.exited
}

// StopSoon asks the goroutine to end once it is done with the work at hand,
// without waiting for it: an actor calls it from its own handler (its
// Stopped message), on the pinned goroutine, where Stop would wait for
// itself.
func (d *Dispatcher) StopSoon() { d.stopOnce.Do(func() { close(d.stop) }) }

// Done is closed once the pinned goroutine has exited (after Stop or
// StopSoon), and its thread with it.
func (d *Dispatcher) Done() <-chan struct{} { return d.exited }

// Queued is the number of user messages posted to the pinned mailbox and not
// yet taken (0 before an actor is spawned on the dispatcher). It may be stale
// by the time it is read.
func (d *Dispatcher) Queued() int64 {
	if m := d.mailbox.Load(); m != nil {
		return m.waiting.Load()
	}
	return 0
}

// OnTakeover sets fn to run on a fresh pinned goroutine that takes over
// after runtime.Goexit ended the one before, before it does any other work:
// the GPU actor makes its backend's context current on the new thread there.
// Call it on the pinned goroutine (from a message handler), before any
// takeover.
func (d *Dispatcher) OnTakeover(fn func()) { d.onTakeover = fn }

// Takeovers counts the fresh pinned goroutines that took over after
// runtime.Goexit ended the one before.
func (d *Dispatcher) Takeovers() int64 { return d.takeovers.Load() }

// ThreadIDs returns the thread ids (ThreadID) that ran the goroutine's work:
// one, plus one per takeover. Call it only on the pinned goroutine (from a
// message handler or a scheduled function).
func (d *Dispatcher) ThreadIDs() []int {
	ids := make([]int, 0, len(d.threads))
	for id := range d.threads {
		ids = append(ids, id)
	}
	return ids
}
