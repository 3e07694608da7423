package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// Supervisors are the three supervisors of one GPU worker and typed calls to
// them. Make them with Spawn; stop them with Stop before stopping the worker.
type Supervisors struct {
	system  *actor.ActorSystem
	worker  *gpuworker.Worker
	arena   *actor.PID
	slab    *actor.PID
	release *actor.PID
	done    chan struct{}
}

// Spawn starts the release, arena and slab supervisors for worker.
func Spawn(system *actor.ActorSystem, worker *gpuworker.Worker) *Supervisors {
	s := &Supervisors{system: system, worker: worker, done: make(chan struct{})}
	s.release = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &releaseSupervisor{worker: worker}
	}))
	s.slab = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &slabSupervisor{}
	}))
	s.arena = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &arenaSupervisor{worker: worker, release: s.release, slab: s.slab}
	}))
	return s
}

// Stop stops the supervisors after the messages already in their mailboxes,
// and waits for them. It does not release anything: call Release first.
func (s *Supervisors) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	for _, pid := range []*actor.PID{s.arena, s.slab, s.release} {
		_ = s.system.Root.PoisonFuture(pid).Wait()
	}
	close(s.done)
}

func ask[R any](ctx context.Context, s *Supervisors, pid *actor.PID, msg any, reply <-chan R) (R, error) {
	return gpuworker.Ask(ctx, s.system.Root, pid, msg, reply, s.done)
}

// BuildArena builds the arena of plan with layout ("" is pooled); see
// messages.BuildArena. Errors:
// ErrArenaBuilt, ErrReleased, the context's error, and the GPU worker's
// (an *gpuworker.OutOfMemoryError when a buffer does not fit).
func (s *Supervisors) BuildArena(ctx context.Context, plan *arena.Plan, layout messages.Layout) (*messages.Arena, error) {
	reply := make(chan messages.BuildArenaReply, 1)
	r, err := ask(ctx, s, s.arena, &messages.BuildArena{Ctx: ctx, Plan: plan, Layout: layout, Reply: reply}, reply)
	if err != nil {
		return nil, err
	}
	return r.Arena, r.Err
}

// Forward runs one forward step on the arena. Errors: ErrNoArena,
// ErrReleased, the context's error, and the step's.
func (s *Supervisors) Forward(ctx context.Context, step messages.ArenaStep) (messages.ForwardReply, error) {
	reply := make(chan messages.ForwardReply, 1)
	r, err := ask(ctx, s, s.arena, &messages.RunForward{Ctx: ctx, Step: step, Reply: reply}, reply)
	if err != nil {
		return r, err
	}
	return r, r.Err
}

// CarveSlab carves bytes bytes (aligned to align, 0: DefaultSlabAlign) from
// slab name. Errors: arena.ErrSlabAbsent, arena.ErrSlabExhausted, ErrReleased.
func (s *Supervisors) CarveSlab(ctx context.Context, name string, bytes, align int64) (messages.CarveSlabReply, error) {
	reply := make(chan messages.CarveSlabReply, 1)
	r, err := ask(ctx, s, s.slab, &messages.CarveSlab{Ctx: ctx, Name: name, Bytes: bytes, Align: align, Reply: reply}, reply)
	if err != nil {
		return r, err
	}
	return r, r.Err
}

// Release retires the arena and the slabs (later forward steps and carves get
// ErrReleased), then frees every registered resource. It runs to the end
// whatever ctx says once started; ctx bounds only the wait.
func (s *Supervisors) Release(ctx context.Context) (messages.ReleaseReply, error) {
	retired := make(chan error, 1)
	if _, err := ask(ctx, s, s.arena, &messages.RetireArena{Reply: retired}, retired); err != nil {
		return messages.ReleaseReply{}, fmt.Errorf("release: %w", err)
	}
	if _, err := ask(ctx, s, s.slab, &messages.RetireSlabs{Reply: retired}, retired); err != nil {
		return messages.ReleaseReply{}, fmt.Errorf("release: %w", err)
	}
	reply := make(chan messages.ReleaseReply, 1)
	r, err := ask(ctx, s, s.release, &messages.Release{Ctx: ctx, Reply: reply}, reply)
	if err != nil {
		return r, err
	}
	return r, r.Err
}
