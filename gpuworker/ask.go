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

// sendAndWait is Ask's frame: it checks ctx and done, calls send (which sends the
// request and may already have the reply), then waits for the reply, ctx or
// done.
func sendAndWait[R any](ctx context.Context, done <-chan struct{}, send func() (R, bool), reply <-chan R) (R, error) {
	var zero R
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	select {
	case <-done:
		return zero, ErrClosed
	default:
	}
	if r, ok := send(); ok {
		return r, nil
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-done:
		select {
		case r := <-reply:
			return r, nil
		default:
			return zero, ErrClosed
		}
	}
}
