package gpuworker

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// DefaultBusyPoll bounds how long a caller alone in the GPU actor's mailbox
// keeps polling for its reply while the GPU thread runs: the spin covers a
// request the GPU thread answers at once, this covers a driver call
// (cuMemAlloc of a large pool, a batch of cuMemFree) that takes tens or
// hundreds of microseconds. Past it the caller parks, and the reply wakes it.
//
// Chosen by measurement (docs/performance.md): a parked caller costs one
// thread wake-up per request, 10 to 60 µs on the development VM and on the
// H200 host, which a build or release of a few hundred microseconds pays
// once per driver call; polling past 1 ms would save under 5% of such a
// call. A busy poll yields its P every few hundred nanoseconds
// (runtime.Gosched), so it delays no other goroutine. A forward step runs
// the embedder's code for an unknown time: its caller polls for the spin
// only.
const DefaultBusyPoll = time.Millisecond

// pollReply sends with send, then polls reply without parking: for up to
// spin whatever happens, then for up to busyFor from the send while busy is
// true (the recipient is at work; nil: always), yielding its P between
// polls. It reports false when no reply came in that time.
func pollReply[R any](send func(), reply <-chan R, spin, busyFor time.Duration, busy *atomic.Bool) (R, bool) {
	send()
	start := time.Now()
	for {
		for range pollsPerCheck {
			select {
			case r := <-reply:
				return r, true
			default:
			}
		}
		waited := time.Since(start)
		if waited < spin {
			continue
		}
		if waited >= busyFor || (busy != nil && !busy.Load()) {
			var zero R
			return zero, false
		}
		runtime.Gosched()
	}
}

// askPolling is Ask for a caller whose request will be alone in the GPU
// actor's mailbox: it polls for the reply (pollReply) for the dispatcher's
// spin and, while the GPU thread runs, for up to busy; then it waits as Ask
// does, for the reply, ctx or the worker's exit. Errors: the context's, or
// ErrClosed.
//
// It marks the dispatcher hot first, so the pinned goroutine spins for the
// next request rather than parking. When the send woke a parked pinned
// goroutine, the runtime has put it on this goroutine's P: yield that P
// first, or the request would wait for this poll to end.
func askPolling[R any](ctx context.Context, w *Worker, msg any, reply <-chan R, busy time.Duration) (R, error) {
	d := w.dispatcher
	return sendAndWait(ctx, w.status.exited, func() (R, bool) {
		d.hot.Store(true)
		return pollReply(func() {
			w.system.Root.Send(w.pid, msg)
			if d.parked.Load() {
				runtime.Gosched()
			}
		}, reply, d.spin, busy, &d.running)
	}, reply)
}

// AskPolling is Ask for a caller that expects its reply within poll and is
// the only one waiting on the recipient: it yields its P at once (the
// recipient, scheduled by the send, may be waiting for it), then polls the
// reply, yielding between polls, for up to poll; then it waits as Ask does.
// A reply that comes within poll costs no thread wake-up. Errors: as Ask.
func AskPolling[R any](ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, reply <-chan R, done <-chan struct{}, poll time.Duration) (R, error) {
	return sendAndWait(ctx, done, func() (R, bool) {
		return pollReply(func() {
			root.Send(pid, msg)
			runtime.Gosched()
		}, reply, 0, poll, nil)
	}, reply)
}
