package pinned

import "golang.org/x/sys/unix"

// ThreadID returns the id of the calling OS thread (gettid(2)): the id the
// Dispatcher records for the threads its goroutine ran on (ThreadIDs), and
// that OnPinnedThread compares.
func ThreadID() int { return unix.Gettid() }
