package gpuworker

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
)

// Ask sends msg to pid and waits for the reply on reply (a channel with room
// for one, carried in msg), for ctx, or for done (closed when the recipient
// has stopped), whichever comes first. A request whose context is already
// done is not sent. Errors: the context's error, or ErrClosed when done closes
// with no reply.
//
// Giving up on a reply does not cancel work the recipient has started; what it
// allocated stays in the ledger under the request's owner until that owner is
// released.
func Ask[R any](ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, reply <-chan R, done <-chan struct{}) (R, error) {
	return sendAndWait(ctx, done, func() (R, bool) {
		root.Send(pid, msg)
		var zero R
		return zero, false
	}, reply)
}

// AskVia is Ask for a request that pid serves by making requests of w: a
// supervisor of the worker's, spawned in the worker's actor system. It is
// SendVia, then AwaitVia. Errors: those of Ask, and ErrReentrant.
func AskVia[R any](ctx context.Context, w *Worker, pid *actor.PID, msg any, reply <-chan R, done <-chan struct{}) (R, error) {
	if err := SendVia(ctx, w, pid, msg, done); err != nil {
		var zero R
		return zero, err
	}
	return AwaitVia(ctx, w, reply, done)
}

// SendVia sends a request that pid serves by making requests of w, and
// does not wait for its reply (AwaitVia does). The worker gets its GPU
// thread ready for the request that follows: a parked thread is woken now,
// so that its wake-up overlaps the hop through pid, and it spins for the
// request rather than parking (when callers poll at all; see WithSpin).
// Requests one goroutine sends reach pid in the order it sent them. Errors,
// with nothing sent: ErrReentrant on the GPU thread, from inside a forward
// step (a wait there would wait for itself); the context's error; ErrClosed
// when done is closed.
func SendVia(ctx context.Context, w *Worker, pid *actor.PID, msg any, done <-chan struct{}) error {
	if err := w.CheckCaller(); err != nil {
		return err
	}
	if err := sendable(ctx, done); err != nil {
		return err
	}
	w.dispatcher.Expect()
	w.system.Root.Send(pid, msg)
	return nil
}

// AwaitVia waits for the reply to a request SendVia sent, for ctx, or for
// done (the recipient stopped) or the worker to be Gone, whichever comes
// first: the reply may come from the GPU actor itself (a forward step pid
// handed on: Worker.QueueForward). Errors: the context's error, or
// ErrClosed when done closes or the worker is gone with no reply.
func AwaitVia[R any](ctx context.Context, w *Worker, reply <-chan R, done <-chan struct{}) (R, error) {
	return waitReply(ctx, done, w.status.gone, reply)
}

// sendable checks what must hold before a request is sent: the
// context's error, or ErrClosed when done is closed; nil otherwise.
func sendable(ctx context.Context, done <-chan struct{}) error {
	if ctx != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-done:
		return ErrClosed
	default:
		return nil
	}
}

// sendAndWait is Ask's frame: it checks ctx and done (sendable), calls
// send (which sends the request and may already have the reply), then
// waits for the reply, ctx or done.
func sendAndWait[R any](ctx context.Context, done <-chan struct{}, send func() (R, bool), reply <-chan R) (R, error) {
	var zero R
	if err := sendable(ctx, done); err != nil {
		return zero, err
	}
	if r, ok := send(); ok {
		return r, nil
	}
	return waitReply(ctx, done, nil, reply)
}

// waitReply waits for the reply, ctx, done or also (nil: never), whichever
// comes first; a reply already there when done or also closes is returned.
// Errors: the context's error, ErrClosed.
func waitReply[R any](ctx context.Context, done, also <-chan struct{}, reply <-chan R) (R, error) {
	var zero R
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-done:
	case <-also:
	}
	select {
	case r := <-reply:
		return r, nil
	default:
		return zero, ErrClosed
	}
}
