package gpuworker

import (
	"runtime"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"
)

// PinnedDispatcher is a protoactor-go actor.Dispatcher that runs every
// scheduled function on one goroutine locked to one OS thread
// (runtime.LockOSThread). The GPU actor is spawned on it, so every backend
// call, and the CUDA context that is current there, stays on that thread.
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

	// threads holds the OS thread ids that ran scheduled functions. It is
	// read and written on the pinned goroutine only.
	threads map[int]struct{}
}

var _ actor.Dispatcher = (*PinnedDispatcher)(nil)

// DefaultThroughput is the number of messages the GPU actor handles per
// scheduling before the mailbox yields (protoactor-go's Throughput).
const DefaultThroughput = 300

// NewPinnedDispatcher starts the pinned goroutine. throughput ≤ 0 means
// DefaultThroughput. spin is how long the goroutine polls for new work before
// it parks (0: park at once); a spinning thread holds one CPU, so keep it to
// microseconds.
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
	for {
		fn, ok := d.next()
		if !ok {
			return
		}
		d.threads[unix.Gettid()] = struct{}{}
		fn()
	}
}

// next waits for the next function, spinning first when configured.
func (d *PinnedDispatcher) next() (func(), bool) {
	if d.spin > 0 {
		deadline := time.Now().Add(d.spin)
		for time.Now().Before(deadline) {
			select {
			case fn := <-d.work:
				return fn, true
			case <-d.stop:
				return nil, false
			default:
			}
		}
	}
	select {
	case fn := <-d.work:
		return fn, true
	case <-d.stop:
		return nil, false
	}
}

// Schedule hands fn to the pinned goroutine. After Stop it drops fn.
func (d *PinnedDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	case <-d.stop:
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
