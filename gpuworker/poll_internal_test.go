package gpuworker

import (
	"sync/atomic"
	"testing"
	"time"
)

// gpuThread is a GPU thread that is worth polling or not, for pollReply.
type gpuThread struct{ up atomic.Bool }

func (g *gpuThread) worthPolling(time.Duration) bool { return g.up.Load() }

func awakeThread() *gpuThread {
	g := &gpuThread{}
	g.up.Store(true)
	return g
}

// A reply that comes while the GPU thread is awake is taken by polling,
// past the spin.
func TestPollReplyPollsWhileAwake(t *testing.T) {
	reply := make(chan int, 1)
	go func() {
		time.Sleep(200 * time.Microsecond)
		reply <- 42
	}()
	r, ok := pollReply(reply, nil, nil, time.Microsecond, time.Hour, awakeThread())
	if !ok || r != 42 {
		t.Fatalf("pollReply = %d, %v; want 42, true", r, ok)
	}
}

// Past the spin, a caller stops polling as soon as polling is not worth it,
// however long busyFor is (with an hour's busyFor, a poll that ignored it
// would outlast the test's deadline).
func TestPollReplyStopsWhenNotWorthIt(t *testing.T) {
	reply := make(chan int, 1)
	r, ok := pollReply(reply, nil, nil, time.Microsecond, time.Hour, &gpuThread{})
	if ok || r != 0 {
		t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
	}
}

// A done context or a stopped worker ends the poll at once, even in the
// spin (an hour long here) and with an awake GPU thread.
func TestPollReplyStopsOnCancelOrExit(t *testing.T) {
	for _, name := range []string{"cancel", "exited"} {
		t.Run(name, func(t *testing.T) {
			reply := make(chan int, 1)
			closed := make(chan struct{})
			close(closed)
			cancel, exited := closed, make(chan struct{})
			if name == "exited" {
				cancel, exited = nil, closed
			}
			r, ok := pollReply(reply, cancel, exited, time.Hour, time.Hour, awakeThread())
			if ok || r != 0 {
				t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
			}
		})
	}
}

// An awake GPU thread is polled for busyFor in all, not less.
func TestPollReplyStopsAfterBusyFor(t *testing.T) {
	reply := make(chan int, 1)
	start := time.Now()
	r, ok := pollReply(reply, nil, nil, 0, time.Millisecond, awakeThread())
	if ok || r != 0 {
		t.Fatalf("pollReply = %d, %v; want 0, false", r, ok)
	}
	if waited := time.Since(start); waited < time.Millisecond {
		t.Fatalf("pollReply gave up after %v, before busyFor (1ms)", waited)
	}
}
