package actors

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// arenaSupervisor builds the arena and hands forward steps on it to the GPU
// actor, whose mailbox runs them one at a time, in order.
//
// Its state (the arena, whether it was released) is also in the ledger: a
// built arena's allocations are tagged with it, and a release retires the
// arena owner. On *actor.Started — the first start and every restart — it
// reads that state back (rebuild).
type arenaSupervisor struct {
	worker  *gpuworker.Worker
	cfg     config
	release *actor.PID
	slab    *actor.PID

	// arena is the built arena, tagged in the ledger and registered with the
	// slab and release supervisors; it is never handed out: the caller of
	// BuildArena and every forward step get shared, a copy made with it
	// (builtArena).
	arena   *device.Arena
	shared  *device.Arena
	retired bool
}

// Receive handles Started, BuildArena, RunForward, Release (its part:
// retire the arena, then hand the release to the slab supervisor) and
// ResetArena (its part: forget the released arena, then hand the reset to
// the slab supervisor).
func (s *arenaSupervisor) Receive(c actor.Context) {
	defer answerPanic("arena", s.cfg.logger, c.Message())
	s.cfg.received("arena", c.Message())
	switch m := c.Message().(type) {
	case *actor.Started:
		s.rebuild(c)
		s.cfg.hook("arena", PointStarted)
	case *messages.BuildArena:
		if err := s.cfg.refusing("build arena"); err != nil {
			m.Reply <- messages.BuildArenaReply{Err: err}
			return
		}
		a, err := s.build(c, m)
		m.Reply <- messages.BuildArenaReply{Arena: a, Err: err}
	case *messages.RunForward:
		if err := s.cfg.refusing("forward"); err != nil {
			m.Reply <- messages.ForwardReply{Err: err}
			return
		}
		if err := s.forward(m); err != nil {
			m.Reply <- messages.ForwardReply{Err: err}
		}
	case *messages.ResetArena:
		if err := s.reset(m); err != nil {
			m.Reply <- err
			return
		}
		c.Send(s.slab, m)
	case *messages.Release:
		if s.arena == nil && !s.retired {
			// Nothing to release: the manager stays buildable.
			m.Reply <- messages.ReleaseReply{Err: fmt.Errorf("release: %w", ErrNoArena)}
			return
		}
		s.retired = true
		m.RetireErr = s.worker.RetireOwners(uncancelled, []string{device.ArenaOwner})
		c.Send(s.slab, m)
	}
}

// reset forgets a released arena whose release freed all of it, and takes
// its owner off the ledger's retired list, so that BuildArena builds again;
// with no arena, built or released, it does nothing. Errors: ErrNotReleased
// (an arena built and not released, or a release that left allocations of
// the arena or its slabs live); the GPU actor's.
func (s *arenaSupervisor) reset(m *messages.ResetArena) error {
	if err := s.cfg.refusing("reset arena"); err != nil {
		return err
	}
	switch {
	case !s.retired && s.arena == nil:
		return nil // no arena, built or released: nothing to reset
	case !s.retired:
		return fmt.Errorf("reset: %w: the arena is built; call Release first", ErrNotReleased)
	}
	if m.Ctx != nil && m.Ctx.Err() != nil {
		return fmt.Errorf("reset: %w", m.Ctx.Err())
	}
	st, err := readLedger(s.worker)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if n := len(st.live); n > 0 {
		var bytes int64
		for _, e := range st.live {
			bytes += e.Bytes
		}
		return fmt.Errorf("reset: %w: the release left %d allocation(s) of the arena and its slabs live (%d B): call Release again", ErrNotReleased, n, bytes)
	}
	if err := s.worker.RestoreOwners(uncancelled, []string{device.ArenaOwner}); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	s.arena, s.shared, s.retired = nil, nil, false
	return nil
}

// rebuild reads the supervisor's state from the ledger: the built arena and
// whether it was released. A build is tagged in the ledger whole or not at
// all; what a failed build's rollback could not free (untagged allocations
// of the arena and slab owners) is freed here, in case the supervisor failed
// before it did so itself. The built arena is handed to the slab and release
// supervisors again, which ignore what they already have.
func (s *arenaSupervisor) rebuild(c actor.Context) {
	st, err := readLedger(s.worker)
	if err != nil {
		s.cfg.logger.Warn("arena supervisor: cannot read the ledger", "err", err)
		return
	}
	s.arena, s.shared, s.retired = st.arena, st.shared, st.retired
	for _, e := range st.orphans {
		if err := s.worker.Free(uncancelled, e.Owner, e.Ptr); err != nil {
			s.cfg.logger.Error("arena supervisor: free a failed build's allocation", "label", e.Label, "owner", e.Owner, "bytes", e.Bytes, "err", err)
		}
	}
	// A retired arena is not registered again: its release is under way or
	// done, and a registration arriving behind it would have the release
	// supervisor free it twice.
	if s.arena != nil && !s.retired {
		s.register(c, s.arena)
	}
}

// register hands a built arena to the slab supervisor (its slabs) and to the
// release supervisor (the arena and its slabs): one message to each, so that
// a failure of one supervisor loses nothing the other must know; the one
// that restarts reads it back from the ledger.
func (s *arenaSupervisor) register(c actor.Context, a *device.Arena) {
	reg := &messages.RegisterArena{Arena: a}
	c.Send(s.slab, reg)
	c.Send(s.release, reg)
}

func (s *arenaSupervisor) build(c actor.Context, m *messages.BuildArena) (*device.Arena, error) {
	switch {
	case s.retired:
		return nil, fmt.Errorf("build arena: %w; reset after the release (Manager.Reset) to build again", ErrReleased)
	case s.arena != nil:
		return nil, fmt.Errorf("build arena: %w (%s, %s)", ErrArenaBuilt, s.arena.Plan.ModelType, arena.HumanBytes(s.arena.Plan.BufferBytes))
	}
	// The one check of the plan's contents, the same for both layouts and
	// before anything reaches the GPU actor: a plan it refuses allocates
	// nothing. The error is an *arena.PlanError (arena.ErrInvalidPlan) and
	// also matches gpuworker.ErrInvalidValue, as every bad argument does.
	if err := m.Plan.Validate(); err != nil {
		return nil, fmt.Errorf("build arena: %w: %w", gpuworker.ErrInvalidValue, err)
	}
	switch {
	case m.Layout != "" && m.Layout != device.LayoutPooled && m.Layout != device.LayoutDiscrete:
		return nil, fmt.Errorf("build arena: layout %q: %w: want %q or %q", m.Layout, gpuworker.ErrInvalidValue, device.LayoutPooled, device.LayoutDiscrete)
	case m.Ctx != nil && m.Ctx.Err() != nil:
		return nil, fmt.Errorf("build arena: %w", m.Ctx.Err())
	}
	// From here on the build runs to its end whatever the caller's context
	// says: a half-built arena the caller gave up on would leak. A built arena
	// is registered for release even when nobody waits for it any more.
	a, err := s.allocate(m.Plan, m.Layout)
	if err != nil {
		s.cfg.hook("arena", PointBuildFailed)
		// The GPU actor rolled the build back; what its frees left (a free
		// that failed) is untagged and freed here, by owner. After a backend
		// panic the worker serves no more requests: Close frees the ledger.
		if !errors.Is(err, gpuworker.ErrBackendPanic) {
			if ferr := s.freeUnfinished(m.Plan); ferr != nil {
				err = fmt.Errorf("%w (and freeing what the rollback left failed: %v)", err, ferr)
			}
		}
		return nil, fmt.Errorf("build arena (%s, %s; largest buffers: %s): %w",
			m.Plan.ModelType, arena.HumanBytes(m.Plan.TotalBytes), largest(m.Plan, 3), err)
	}
	s.cfg.hook("arena", PointBuilt)
	s.arena, s.shared = a.own, a.shared
	s.register(c, a.own)
	return a.shared, nil
}

// freeUnfinished frees whatever a failed build left: everything the arena's
// and the plan's slabs' owners hold (no arena is built, so nothing else is
// theirs). After a successful rollback they hold nothing and this frees
// nothing.
func (s *arenaSupervisor) freeUnfinished(plan *arena.Plan) error {
	owners := []string{device.ArenaOwner}
	for _, spec := range plan.Slabs {
		owners = append(owners, device.SlabOwner(spec.Name))
	}
	var first error
	for _, o := range owners {
		if _, _, err := s.worker.FreeOwner(uncancelled, o); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// allocate makes the arena's allocations (the pool, or one per buffer, and
// the slabs), zero-fills the buffers whose BufferID.ZeroFill is true
// (design.md §5: they must read as zeros before the first step) and tags the allocations with the arena, in one
// request to the GPU actor that does all of it or none: the ledger never
// holds half a build as a built arena, and a supervisor restarted after it
// finds the arena there.
func (s *arenaSupervisor) allocate(plan *arena.Plan, layout device.Layout) (*builtArena, error) {
	b, err := newArenaBatch(plan, layout)
	if errors.Is(err, arena.ErrOverflow) {
		// A valid plan whose pool, rounded to its alignment, passes int64:
		// more than any device holds, as the discrete layout would report.
		return nil, fmt.Errorf("%w: the pooled arena's size overflows int64 (%w)", gpuworker.ErrOutOfMemory, err)
	}
	if err != nil {
		return nil, err
	}
	_, tag, err := s.worker.AllocBatch(uncancelled, device.ArenaOwner, b.items,
		func(ptrs []device.DevicePtr) any { return newBuiltArena(b.arena(ptrs)) })
	if err != nil {
		return nil, err
	}
	return tag.(*builtArena), nil
}

// largest names the plan's n largest buffers ("logits 2.32 GiB, ...").
func largest(plan *arena.Plan, n int) string {
	bufs := slices.Clone(plan.Buffers[:])
	slices.SortStableFunc(bufs, func(x, y arena.Buffer) int { return cmp.Compare(y.Bytes, x.Bytes) })
	parts := make([]string, 0, n)
	for _, b := range bufs[:n] {
		if b.Present() {
			parts = append(parts, b.ID.String()+" "+arena.HumanBytes(b.Bytes))
		}
	}
	return strings.Join(parts, ", ")
}

// forward hands a step of the built arena to the GPU actor, which answers
// its caller (m.Reply) when the step has run; it does not wait for it, so
// the next step is already in the GPU actor's mailbox when this one ends,
// and a release that follows queues behind both there (the arena is never
// freed under a step). It returns the error of a step it did not hand on.
func (s *arenaSupervisor) forward(m *messages.RunForward) error {
	switch {
	case m.Step == nil:
		return fmt.Errorf("forward: %w: nil step", gpuworker.ErrInvalidValue)
	case s.retired:
		return fmt.Errorf("forward: %w", ErrReleased)
	case s.arena == nil:
		return fmt.Errorf("forward: %w", ErrNoArena)
	case m.Ctx != nil && m.Ctx.Err() != nil:
		return fmt.Errorf("forward: %w", m.Ctx.Err())
	}
	s.cfg.hook("arena", PointForward)
	a := s.shared
	// The step's caller decides, with the GPU thread, whether it starts
	// (Supervisors.Forward).
	return s.worker.QueueForward(uncancelled, func(dev device.Device) error { return m.Step(a, dev) }, m.Reply)
}
