//go:build !linux

package pinned

import "runtime"

// ThreadID returns an id of the calling goroutine, which stands for its OS
// thread where gettid(2), Linux's, is not available: the Dispatcher records
// it for its goroutine (ThreadIDs), and OnPinnedThread compares it. The
// pinned goroutine is locked to its thread and that thread runs no other
// goroutine, so for it the two name each other: one id per pinned thread,
// and a new one when a goroutine takes over on a fresh thread. For a
// goroutine that is not locked it names the goroutine only.
//
// It reads the id from the goroutine's stack header ("goroutine 42 [..."),
// which costs a stack trace of the caller: OnPinnedThread reads it only
// while the pinned goroutine runs.
func ThreadID() int {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	id := 0
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + int(c-'0')
	}
	return id
}
