package gpuworker

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
