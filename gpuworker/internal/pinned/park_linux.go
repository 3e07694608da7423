package pinned

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// parkAlwaysInKernel parks in futex(2) whatever GOMAXPROCS is (tests of
// that mode).
const parkAlwaysInKernel = parkAlwaysInScheduler + 1

// parkInKernelFromProcs is the GOMAXPROCS from which the goroutine parks in
// futex(2) rather than in the Go scheduler.
//
// Woken through a channel, a parked locked goroutine is queued on its
// waker's P, then handed a P through a second thread wake-up; a caller that
// polls for its reply on that P holds it meanwhile. Woken from futex, the
// thread returns from a system call on the P it kept: one wake-up, and no
// other P involved, so the request starts sooner (docs/performance.md). But
// a P kept by a thread asleep in a system call is lost to the rest of the
// program until the runtime takes it back (after 20 µs to 10 ms): with few
// Ps the rest of the program stalls (docs/performance.md), with many the P
// is not missed.
const parkInKernelFromProcs = 4

// park waits until there is work (true) or Stop was called (false), in
// futex(2) or in the Go scheduler as the policy and GOMAXPROCS say.
func (d *Dispatcher) park() bool {
	procs := d.readProcs()
	kernel := d.policy == parkAlwaysInKernel || (d.policy == parkByProcs && procs >= parkInKernelFromProcs)
	d.inKernel.Store(kernel)
	d.idle.Store(true)
	defer d.idle.Store(false)
	if !kernel {
		return d.parkInScheduler()
	}
	for {
		d.parked.Store(parkedInKernel)
		if d.pending() {
			d.parked.Store(notParked)
			return true
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
func (d *Dispatcher) notify() {
	switch d.parked.Load() {
	case parkedInKernel:
		if d.parked.CompareAndSwap(parkedInKernel, notParked) {
			futexWake(&d.parked)
		}
	case parkedInScheduler:
		d.wakeScheduler()
	}
}

// futex(2) operations on a process-private word (linux/futex.h:
// FUTEX_WAIT 0, FUTEX_WAKE 1, FUTEX_PRIVATE_FLAG 128).
const (
	futexWaitPrivate = 0 | 128
	futexWakePrivate = 1 | 128
)

// futexWait blocks the calling OS thread in the kernel while *word == val.
// It returns on a futexWake, at once when *word != val, and sometimes for no
// reason (a signal): callers re-check their condition. The word must not
// move: it is a field of a heap object, which Go never moves.
func futexWait(word *atomic.Uint32, val uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWaitPrivate, uintptr(val), 0, 0, 0)
}

// futexWake wakes one thread blocked in futexWait on word.
func futexWake(word *atomic.Uint32) {
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWakePrivate, 1, 0, 0, 0)
}
