package pinned

import (
	"runtime"
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

// replyingInvoker answers each user message, a chan int, with 42. The
// channels are unbuffered: the pinned goroutine stays awake, in the send,
// until the caller takes the reply, so a polling caller's poll never ends
// for want of an awake goroutine.
type replyingInvoker struct{}

func (replyingInvoker) InvokeSystemMessage(any)  {}
func (replyingInvoker) InvokeUserMessage(m any)  { m.(chan int) <- 42 }
func (replyingInvoker) EscalateFailure(any, any) {}

// withProcs sets GOMAXPROCS to at least 2 until the test ends: a caller
// polls only when the pinned goroutine has a P of its own.
func withProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// A caller alone in the mailbox gets its reply by polling; one behind a
// queued message does not poll (false at once, the request sent, the
// dispatcher not marked hot), and its reply comes once the queue moves.
func TestSendAndPollPollsOnlyForALoneCaller(t *testing.T) {
	withProcs(t)
	d := New(0, DefaultSpin)
	defer d.Stop()
	m := NewMailbox().(*mailbox)
	m.RegisterHandlers(replyingInvoker{}, d)

	// The goroutine is kept awake (in a scheduled function) until the
	// request is sent, so the caller polls until the reply comes.
	awake, sent := make(chan struct{}), make(chan struct{})
	d.Schedule(func() { close(awake); <-sent })
	<-awake
	reply := make(chan int)
	send := func() { m.PostUserMessage(reply); close(sent) }
	r, ok := SendAndPoll(d, send, reply, nil, nil, time.Hour)
	if !ok {
		r = <-reply // let the goroutine go, so that it stops
	}
	if !ok || r != 42 {
		t.Fatalf("a lone caller: SendAndPoll = %d, %v; want 42, true", r, ok)
	}

	hold, held := make(chan struct{}), make(chan struct{})
	d.Schedule(func() { close(held); <-hold })
	<-held
	d.hot.Store(false) // the first caller's mark, which the held goroutine may not have taken up
	first, second := make(chan int), make(chan int)
	m.PostUserMessage(first)
	if r, ok := SendAndPoll(d, func() { m.PostUserMessage(second) }, second, nil, nil, time.Millisecond); ok || r != 0 || d.hot.Load() {
		t.Fatalf("a caller behind a queued message: SendAndPoll = %d, %v, hot %v; want 0, false, not hot", r, ok, d.hot.Load())
	}
	if n := d.Queued(); n != 2 {
		t.Fatalf("Queued = %d while the goroutine is held, want 2", n)
	}
	close(hold)
	if a, b := <-first, <-second; a != 42 || b != 42 {
		t.Fatalf("replies %d, %d after the queue moved, want 42, 42", a, b)
	}
}

// With no spin nobody polls: the request is sent and the caller told to
// block.
func TestSendAndPollDoesNotPollWithoutASpin(t *testing.T) {
	withProcs(t)
	d := New(0, 0)
	defer d.Stop()
	m := NewMailbox().(*mailbox)
	m.RegisterHandlers(replyingInvoker{}, d)
	reply := make(chan int)
	if r, ok := SendAndPoll(d, func() { m.PostUserMessage(reply) }, reply, nil, nil, time.Hour); ok || r != 0 {
		t.Fatalf("SendAndPoll with no spin = %d, %v; want 0, false", r, ok)
	}
	if r := <-reply; r != 42 {
		t.Fatalf("reply %d, want 42", r)
	}
}
