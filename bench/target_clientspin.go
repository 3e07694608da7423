package bench

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// ClientSpin is how long the gpuarena+client-spin target's callers poll for
// their reply before they park.
const ClientSpin = PollingSpin

// clientSpin is an experiment, not a peer: gpuarena's worker and dispatcher
// unchanged, asked by a caller that polls its reply channel for up to
// ClientSpin before it parks — but only when its request is alone in the
// mailbox (Worker.MailboxDepth ≤ 1), so that under contention callers park
// at once instead of burning the CPUs the GPU thread's replies need. It
// measures what a spinning Ask would buy: a parked caller costs a thread
// wake-up per reply, which no dispatcher-side spin can save.
type clientSpin struct {
	*gpuArena
	root *actor.RootContext
}

func newClientSpin(f gpuworker.BackendFactory, spin time.Duration) (*clientSpin, error) {
	g, err := newGPUArena(f, spin)
	if err != nil {
		return nil, err
	}
	return &clientSpin{gpuArena: g, root: g.system.Root}, nil
}

// Exec runs body with a call that sends messages.Ping or messages.MemInfo to
// the GPU actor and spin-waits for the reply.
func (c *clientSpin) Exec(body func(call func(Op) error) error) error {
	ctx := context.Background()
	return body(func(op Op) error {
		if op == OpMemInfo {
			reply := make(chan messages.MemInfoReply, 1)
			r, err := spinAsk(c, &messages.MemInfo{Ctx: ctx, Reply: reply}, reply)
			if err != nil {
				return err
			}
			return r.Err
		}
		reply := make(chan error, 1)
		r, err := spinAsk(c, &messages.Ping{Ctx: ctx, Reply: reply}, reply)
		if err != nil {
			return err
		}
		return r
	})
}

// spinAsk sends msg and waits for its reply, polling first when the request
// is alone in the mailbox.
func spinAsk[R any](c *clientSpin, msg any, reply <-chan R) (R, error) {
	c.root.Send(c.w.PID(), msg)
	if c.w.MailboxDepth() <= 1 {
		deadline := time.Now().Add(ClientSpin)
		for i := 1; ; i++ {
			select {
			case r := <-reply:
				return r, nil
			default:
			}
			if i%64 == 0 && !time.Now().Before(deadline) {
				break
			}
		}
	}
	select {
	case r := <-reply:
		return r, nil
	case <-c.w.Done():
		var zero R
		return zero, gpuworker.ErrClosed
	}
}
