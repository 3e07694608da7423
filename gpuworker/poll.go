package gpuworker

import (
	"context"
	"runtime"
	"time"
)

// pollReply sends with send, then polls reply for up to the dispatcher's
// spin, without parking. It reports false when no reply came in that time.
//
// It marks the dispatcher hot first, so the pinned goroutine spins for the
// next request rather than parking. When the send woke a parked pinned
// goroutine, the runtime has put it on this goroutine's P: yield that P first,
// or the reply would wait for this poll to end.
func pollReply[R any](d *PinnedDispatcher, send func(), reply <-chan R) (R, bool) {
	d.hot.Store(true)
	send()
	if d.parked.Load() {
		runtime.Gosched()
	}
	deadline := time.Now().Add(d.spin)
	for {
		for range pollsPerCheck {
			select {
			case r := <-reply:
				return r, true
			default:
			}
		}
		if !time.Now().Before(deadline) {
			var zero R
			return zero, false
		}
	}
}

// askPolling is Ask for a caller whose request will be alone in the GPU
// actor's mailbox: it polls for the reply for up to the dispatcher's spin
// (pollReply), then waits as Ask does, for the reply, ctx or the worker's
// exit. Errors: the context's, or ErrClosed.
func askPolling[R any](ctx context.Context, w *Worker, msg any, reply <-chan R) (R, error) {
	return sendAndWait(ctx, w.status.exited, func() (R, bool) {
		return pollReply(w.dispatcher, func() { w.system.Root.Send(w.pid, msg) }, reply)
	}, reply)
}
