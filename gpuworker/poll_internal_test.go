package gpuworker

import (
	"sync/atomic"
	"testing"
	"time"
)

// A reply that comes while the GPU thread is busy is taken by polling, past
// the spin.
func TestPollReplyPollsWhileBusy(t *testing.T) {
	reply := make(chan int, 1)
	var busy atomic.Bool
	busy.Store(true)
	go func() {
		time.Sleep(200 * time.Microsecond)
		reply <- 42
	}()
	r, ok := pollReply(reply, time.Microsecond, time.Hour, &busy)
	if !ok || r != 42 {
		t.Fatalf("pollReply = %d, %v; want 42, true", r, ok)
	}
}

// Past the spin, a caller stops polling as soon as the GPU thread is not
// running, however long busyFor is (with an hour's busyFor, a poll that
// ignored busy would outlast the test's deadline).
func TestPollReplyStopsWhenIdle(t *testing.T) {
	reply := make(chan int, 1)
	var busy atomic.Bool
	r, ok := pollReply(reply, time.Microsecond, time.Hour, &busy)
	if ok || r != 0 {
		t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
	}
}

// A busy GPU thread is polled for busyFor in all, not less.
func TestPollReplyStopsAfterBusyFor(t *testing.T) {
	reply := make(chan int, 1)
	var busy atomic.Bool
	busy.Store(true)
	start := time.Now()
	r, ok := pollReply(reply, 0, time.Millisecond, &busy)
	if ok || r != 0 {
		t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
	}
	if waited := time.Since(start); waited < time.Millisecond {
		t.Fatalf("pollReply gave up after %v, before busyFor (1ms)", waited)
	}
}
