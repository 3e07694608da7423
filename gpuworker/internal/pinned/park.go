package pinned

import "runtime"

// parkPolicy says how the pinned goroutine parks.
type parkPolicy uint8

const (
	// parkByProcs parks as the system and GOMAXPROCS, read at each park,
	// say: in futex(2) on Linux from parkInKernelFromProcs Ps, in the Go
	// scheduler otherwise.
	parkByProcs parkPolicy = iota
	// parkAlwaysInScheduler parks in the Go scheduler whatever GOMAXPROCS
	// is (tests of that mode).
	parkAlwaysInScheduler
)

// The values of Dispatcher.parked.
const (
	notParked         uint32 = iota
	parkedInScheduler        // woken by a token on wake
	parkedInKernel           // woken by futexWake (Linux)
)

// Each system's park (park_linux.go, park_other.go) waits until there is
// work (true) or Stop was called (false).
//
// The goroutine sets parked before it looks for work one last time, and a
// producer queues its work before it reads parked (notify): either the
// goroutine sees the work, or the producer sees it parked, and how, and
// wakes it that way. A wake-up that was not needed only makes the next park
// return at once.

// readProcs records GOMAXPROCS as the goroutine reads it at a park, for
// polls, and returns it.
func (d *Dispatcher) readProcs() int {
	procs := runtime.GOMAXPROCS(0)
	d.procs.Store(int32(procs))
	return procs
}

// parkInScheduler parks the goroutine in the Go scheduler, on a channel: a
// producer's token on wake (wakeScheduler) or Stop ends it.
func (d *Dispatcher) parkInScheduler() bool {
	d.parked.Store(parkedInScheduler)
	defer d.parked.Store(notParked)
	if d.pending() {
		return true
	}
	select {
	case <-d.wake:
		return true
	case <-d.stop:
		return false
	}
}

// wakeScheduler wakes a goroutine parked in the scheduler.
func (d *Dispatcher) wakeScheduler() {
	select {
	case d.wake <- struct{}{}:
	default: // a token is there already
	}
}
