package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// Forward runs one forward step on the arena: QueueForward, then Wait.
// ctx bounds the wait until the step starts: a step whose ctx is done
// before then never starts, and Forward returns the context's error. Once
// the step has started, Forward waits for it to return whatever ctx says —
// the step may read or write the caller's memory — unless the manager's
// close gives up on it (ErrClosed). Errors: ErrNoArena, ErrReleased,
// gpuworker.ErrInvalidValue for a nil step, the context's error,
// ErrSupervisorPanic, ErrClosed, and the step's. It returns how long the
// step ran (also when the step failed).
func (s *Supervisors) Forward(ctx context.Context, step func(a *device.Arena, dev device.Device) error) (time.Duration, error) {
	q, err := s.QueueForward(ctx, step)
	if err != nil {
		return 0, err
	}
	return q.Wait()
}

// QueueForward sends a forward step to the arena supervisor and returns
// without waiting for it; Wait waits. The arena supervisor checks the step
// (arena built, not released, not draining) and hands it to the GPU
// actor's mailbox without waiting either, so steps run one at a time, in
// the order they reached the supervisor — for steps one goroutine queues,
// the order it queued them — and a step queued while another runs starts
// the moment that one ends. A step still queued when the manager starts to
// close (Drain) does not start. Errors, with nothing queued: a nil step
// (gpuworker.ErrInvalidValue), the context's error, ErrClosed,
// ErrSupervisorStopped, ErrReentrant from inside a step; the supervisor's
// refusals (ErrNoArena, ErrReleased) come from Wait.
func (s *Supervisors) QueueForward(ctx context.Context, step func(a *device.Arena, dev device.Device) error) (*QueuedStep, error) {
	if step == nil {
		return nil, fmt.Errorf("forward: %w: nil step", gpuworker.ErrInvalidValue)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	q := &QueuedStep{s: s, ctx: ctx, reply: make(chan messages.ForwardReply, 1)}
	if err := s.send(ctx, s.arena, s.arena, &messages.RunForward{Ctx: ctx, Step: q.state.guard(ctx, config{draining: s.draining}, step), Reply: q.reply}); err != nil {
		return nil, err
	}
	return q, nil
}

// QueuedStep is a forward step QueueForward sent.
type QueuedStep struct {
	s     *Supervisors
	ctx   context.Context
	state stepState
	reply chan messages.ForwardReply
	once  sync.Once
	d     time.Duration
	err   error
}

// Wait waits for the step and returns how long it ran and its error, as
// Forward does: until the step starts, its context bounds the wait (a step
// given up on never starts); a started step is waited for to its end,
// unless the manager's close gives up on it. Later calls return the first
// one's result.
func (q *QueuedStep) Wait() (time.Duration, error) {
	q.once.Do(func() {
		r, err := await(q.ctx, q.s, q.s.arena, q.reply)
		if err != nil && !q.state.giveUp() {
			// The step started on the GPU thread (the arena supervisor
			// handed it on): it may use the caller's memory until it
			// returns.
			select {
			case r = <-q.reply:
				err = nil
			case <-q.s.worker.Gone():
				err = q.s.worker.Closed(fmt.Errorf("forward: %w", gpuworker.ErrClosed))
			}
		}
		q.d, q.err = r.Duration, err
		if err == nil {
			q.err = r.Err
		}
	})
	return q.d, q.err
}
