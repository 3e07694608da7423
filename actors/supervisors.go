package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// Supervisors are the three supervisors of one GPU worker and typed calls to
// them. Make them with Spawn; stop them with Stop before stopping the worker.
//
// The supervisors are the children of one parent actor, which supervises
// them with RestartStrategy: a supervisor that panics answers the request it
// was handling with ErrSupervisorPanic and is restarted, rebuilding its state
// from the GPU actor's ledger.
type Supervisors struct {
	system  *actor.ActorSystem
	worker  *gpuworker.Worker
	parent  *actor.PID
	arena   *child
	slab    *child
	release *child
	chain   *child // stopped when any of the three is: a Release goes through all

	closing   chan struct{} // closed when Stop starts
	done      chan struct{} // closed when Stop has returned
	stopOnce  sync.Once
	draining  chan struct{} // closed by Drain
	drainOnce sync.Once
}

// Spawn starts the release, arena and slab supervisors for worker, under a
// parent supervising them with RestartStrategy, in system, which must be the
// one the worker was started in. Each supervisor reads its
// state from the worker's ledger when it starts (the ledger owners "arena"
// and "slab/<name>" are theirs). Nil options are skipped.
func Spawn(system *actor.ActorSystem, worker *gpuworker.Worker, opts ...Option) *Supervisors {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	s := &Supervisors{system: system, worker: worker,
		arena: newChild("arena"), slab: newChild("slab"), release: newChild("release"), chain: newChild("arena, slab or release"),
		closing: make(chan struct{}), done: make(chan struct{}), draining: make(chan struct{})}
	cfg.draining = s.draining
	spawned := make(chan struct{})
	p := &parent{worker: worker, cfg: cfg, release: s.release, slab: s.slab, arena: s.arena, chain: s.chain, spawned: spawned}
	s.parent = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }, actor.WithSupervisor(RestartStrategy())))
	<-spawned
	return s
}

// Drain makes the supervisors refuse, with ErrClosed, every forward step,
// build and carve that reaches them from now on, including those already
// queued in their mailboxes behind a running one: a close then waits for the
// step that runs, not for every step queued behind it. Release still works.
// It is idempotent.
func (s *Supervisors) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Stop stops the supervisors after the messages already in their mailboxes,
// and waits for them. It does not release anything: call Release first.
// It is idempotent; requests sent from now on get ErrClosed.
func (s *Supervisors) Stop() {
	s.stopOnce.Do(func() {
		close(s.closing)
		for _, ch := range []*child{s.arena, s.slab, s.release} {
			_ = s.system.Root.PoisonFuture(ch.pid).Wait()
		}
		_ = s.system.Root.PoisonFuture(s.parent).Wait()
		close(s.done)
	})
	<-s.done
}

// ask sends msg to the supervisor to and waits for its reply (from to, or
// from a supervisor to hands it on to, or from the GPU actor), for ctx, or
// for wait to stop for good: ErrClosed after Stop or once the worker is
// gone, ErrSupervisorStopped (naming the supervisor) when it stopped after
// repeated failures; ErrReentrant from inside a forward step. The request
// goes through gpuworker.SendVia and AwaitVia: every supervisor request
// leads to one of the GPU actor, which the worker gets ready for.
func ask[R any](ctx context.Context, s *Supervisors, to, wait *child, msg any, reply <-chan R) (R, error) {
	if err := s.send(ctx, to, wait, msg); err != nil {
		var zero R
		return zero, err
	}
	return await(ctx, s, wait, reply)
}

// send is ask's first half: it sends msg to the supervisor to without
// waiting.
func (s *Supervisors) send(ctx context.Context, to, wait *child, msg any) error {
	select {
	case <-s.closing:
		return gpuworker.ErrClosed
	default:
	}
	return s.closed(wait, gpuworker.SendVia(ctx, s.worker, to.pid, msg, wait.gone))
}

// await is ask's second half: it waits for the reply to what send sent.
func await[R any](ctx context.Context, s *Supervisors, wait *child, reply <-chan R) (R, error) {
	r, err := gpuworker.AwaitVia(ctx, s.worker, reply, wait.gone)
	return r, s.closed(wait, err)
}

// closed says why ErrClosed came: the worker is gone (with its fatal error),
// the supervisors are stopping, or the supervisor wait stopped for good
// (ErrSupervisorStopped). Other errors are returned as they are.
func (s *Supervisors) closed(wait *child, err error) error {
	if !errors.Is(err, gpuworker.ErrClosed) {
		return err
	}
	select {
	case <-s.worker.Gone(): // first: a worker gone says why, and closing may be closed too
		return s.worker.Closed(err)
	default:
	}
	select {
	case <-s.closing:
		return err
	default:
		return fmt.Errorf("%s supervisor: %w", s.stopped(wait).name, ErrSupervisorStopped)
	}
}

// stopped is the supervisor whose stop closed wait's gone channel: wait
// itself, or for the release chain the first of the three that stopped.
func (s *Supervisors) stopped(wait *child) *child {
	if wait == s.chain {
		for _, ch := range []*child{s.arena, s.slab, s.release} {
			select {
			case <-ch.gone:
				return ch
			default:
			}
		}
	}
	return wait
}

// BuildArena builds the arena of plan with layout ("" is pooled): every
// present buffer (one pool, or one allocation per buffer) and every slab,
// the buffers whose arena.BufferID.ZeroFill is true zero-filled, all or
// nothing. It returns the copy of the arena handed to the caller and to
// every forward step; the supervisors keep their own. Errors:
// ErrArenaBuilt, ErrReleased, the context's error, gpuworker.ErrInvalidValue
// for a bad layout, a plan that arena.Plan.Validate refuses (an
// *arena.PlanError: errors.Is arena.ErrInvalidPlan and
// gpuworker.ErrInvalidValue; refused the same for both layouts, with nothing
// allocated), ErrSupervisorPanic, ErrClosed, and the GPU worker's (an
// *gpuworker.OutOfMemoryError when a buffer does not fit).
func (s *Supervisors) BuildArena(ctx context.Context, plan *arena.Plan, layout device.Layout) (*device.Arena, error) {
	reply := make(chan messages.BuildArenaReply, 1)
	r, err := ask(ctx, s, s.arena, s.arena, &messages.BuildArena{Ctx: ctx, Plan: plan, Layout: layout, Reply: reply}, reply)
	if err != nil {
		return nil, err
	}
	return r.Arena, r.Err
}

// Reset ends a completed release: the arena supervisor forgets the released
// arena (and takes its owner off the ledger's retired list) and the slab
// supervisor its slabs, so BuildArena builds again; until it does, forward
// steps and carves get ErrNoArena and arena.ErrSlabAbsent, not ErrReleased.
// With no arena, built or released, it does nothing. Errors:
// ErrNotReleased when the arena is built and not released, or its release
// left allocations of it live; the context's error; ErrSupervisorStopped;
// ErrClosed.
func (s *Supervisors) Reset(ctx context.Context) error {
	reply := make(chan error, 1)
	r, err := ask(ctx, s, s.arena, s.chain, &messages.ResetArena{Ctx: ctx, Reply: reply}, reply)
	return errors.Join(err, r)
}

// CarveSlab carves bytes bytes (aligned to align, 0: DefaultSlabAlign) from
// slab name, and records the carve in the ledger as a view of the slab. It
// returns the carved region's pointer and its offset in the slab, in bytes.
// Errors: arena.ErrSlabAbsent, arena.ErrSlabExhausted, arena.ErrInvalidCarve,
// ErrReleased, the context's error, ErrSupervisorPanic, ErrClosed.
func (s *Supervisors) CarveSlab(ctx context.Context, name string, bytes, align int64) (ptr device.DevicePtr, offset int64, err error) {
	reply := make(chan messages.CarveSlabReply, 1)
	r, err := ask(ctx, s, s.slab, s.slab, &messages.CarveSlab{Ctx: ctx, Name: name, Bytes: bytes, Align: align, Reply: reply}, reply)
	if err != nil {
		return r.Ptr, r.Offset, err
	}
	return r.Ptr, r.Offset, r.Err
}

// Release retires the arena and the slabs (later forward steps, carves and
// builds get ErrReleased; the retirement is recorded in the ledger), then
// frees every registered resource: one request that the arena, slab and
// release supervisors hand on to each other, so each part
// runs behind the requests already in that supervisor's mailbox. It runs to
// the end whatever ctx says once started; ctx bounds only the wait. It
// returns the first error; ErrNoArena when no arena was built. When one of
// the three supervisors had already stopped for good, it returns
// ErrSupervisorStopped naming it and starts nothing: the arena stays built,
// and Close still frees it. The report says what was freed, also when err
// is not nil.
func (s *Supervisors) Release(ctx context.Context) (device.ReleaseReport, error) {
	reply := make(chan messages.ReleaseReply, 1)
	r, err := ask(ctx, s, s.arena, s.chain, &messages.Release{Reply: reply}, reply)
	if err != nil {
		return r.ReleaseReport, fmt.Errorf("release: %w", err)
	}
	return r.ReleaseReport, r.Err
}
