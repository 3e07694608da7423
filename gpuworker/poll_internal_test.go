package gpuworker

import (
	"sync/atomic"
	"testing"
	"time"
)

// A reply that comes while the recipient is busy is taken by polling, past
// the spin.
func TestPollReplyPollsWhileBusy(t *testing.T) {
	reply := make(chan int, 1)
	var busy atomic.Bool
	busy.Store(true)
	r, ok := pollReply(func() {
		go func() {
			time.Sleep(200 * time.Microsecond)
			reply <- 42
		}()
	}, reply, 0, time.Hour, &busy)
	if !ok || r != 42 {
		t.Fatalf("pollReply = %d, %v; want 42, true", r, ok)
	}
}

// Past the spin, a caller stops polling as soon as the recipient is idle,
// however long busyFor is (with an hour's busyFor, a poll that ignored busy
// would outlast the test's deadline).
func TestPollReplyStopsWhenIdle(t *testing.T) {
	reply := make(chan int, 1)
	var busy atomic.Bool
	r, ok := pollReply(func() {}, reply, time.Microsecond, time.Hour, &busy)
	if ok || r != 0 {
		t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
	}
}

// A busy recipient is polled for busyFor at most.
func TestPollReplyStopsAfterBusyFor(t *testing.T) {
	reply := make(chan int, 1)
	start := time.Now()
	r, ok := pollReply(func() {}, reply, 0, time.Millisecond, nil)
	if ok || r != 0 {
		t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
	}
	if waited := time.Since(start); waited < time.Millisecond {
		t.Fatalf("pollReply gave up after %v, before busyFor (1ms)", waited)
	}
}
