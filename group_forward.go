package gpuarena

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// GroupStep is one rank's part of a group forward step: it runs on rank's
// GPU thread with that rank's arena and device handle, under the rules of
// Manager.Forward's step (the handle is valid only while it runs, on its own
// goroutine; no Manager or Group call from inside it).
type GroupStep func(rank int, a *device.Arena, dev device.Device) error

// Forward runs step on every rank at once, each rank's part on its own GPU
// thread, and returns when every part has returned, with how long each ran,
// by rank. Group steps run one at a time: the next starts on no rank before
// this one has finished on all, so every rank runs the group's steps in the
// same order, as collective communication (NCCL) needs.
//
// ctx bounds the wait for the group's turn: a step whose ctx is done
// before then starts on no rank, and Forward returns the context's error.
// Once its turn has come, a step is sent to every rank whatever ctx says
// (a rank that skipped it would leave the others' collectives waiting), and
// Forward waits for all of them. An error of any rank fails the step: it
// is a *RankError naming the rank and its device (those of several ranks
// joined in rank order), wrapping Manager.Forward's errors (ErrNoArena,
// ErrReleased, ErrStepPanic, the step's own, …); the other ranks' parts
// still ran. Errors of the group: ErrInvalidValue for a nil step,
// ErrClosed once Close has begun, ErrReentrant from inside a step, the
// context's.
func (g *Group) Forward(ctx context.Context, step GroupStep) ([]time.Duration, error) {
	if step == nil {
		return nil, fmt.Errorf("group forward: %w: nil step", ErrInvalidValue)
	}
	if err := g.checkCaller(); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case <-g.closing:
		return nil, fmt.Errorf("group forward: %w", ErrClosed)
	default:
	}
	select {
	case g.step <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("group forward: waiting for the group's turn: %w", ctx.Err())
	case <-g.closing:
		return nil, fmt.Errorf("group forward: %w", ErrClosed)
	}
	defer func() { <-g.step }()
	if err := ctx.Err(); err != nil { // the turn and the cancellation came together
		return nil, fmt.Errorf("group forward: %w", err)
	}
	run := context.WithoutCancel(ctx)
	took := make([]time.Duration, len(g.ranks))
	err := g.each("forward", func(r int, m *Manager) error {
		d, err := m.Forward(run, func(a *device.Arena, dev device.Device) error { return step(r, a, dev) })
		took[r] = d
		return err
	})
	return took, err
}
