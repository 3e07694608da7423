package actors

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// arenaSupervisor builds the arena and runs forward steps on it. Its mailbox
// takes one message at a time, so forward steps queue behind each other.
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

	arena   *messages.Arena
	retired bool
}

// Receive handles Started, BuildArena, RunForward and RetireArena.
func (s *arenaSupervisor) Receive(c actor.Context) {
	defer answerPanic("arena", s.cfg.logger, c.Message())
	s.cfg.received("arena", c.Message())
	switch m := c.Message().(type) {
	case *actor.Started:
		s.rebuild(c)
		s.cfg.hook("arena", PointStarted)
	case *messages.BuildArena:
		a, err := s.build(c, m)
		m.Reply <- messages.BuildArenaReply{Arena: a, Err: err}
	case *messages.RunForward:
		m.Reply <- s.forward(m)
	case *messages.RetireArena:
		if s.arena == nil && !s.retired {
			m.Reply <- ErrNoArena // nothing to release: the manager stays buildable
			return
		}
		s.retired = true
		m.Reply <- s.worker.RetireOwners(uncancelled, []string{messages.ArenaOwner})
	}
}

// rebuild reads the supervisor's state from the ledger: the built arena and
// whether it was released. A build that never finished (the supervisor
// failed between its allocations and tagging them) is rolled back here: its
// caller was answered with an error. The built arena is handed to the slab
// and release supervisors again, which ignore what they already have.
func (s *arenaSupervisor) rebuild(c actor.Context) {
	st, err := readLedger(s.worker)
	if err != nil {
		s.cfg.logger.Warn("arena supervisor: cannot read the ledger", "err", err)
		return
	}
	s.arena, s.retired = st.arena, st.retired
	for _, e := range st.orphans {
		if err := s.worker.Free(uncancelled, e.Owner, e.Ptr); err != nil {
			s.cfg.logger.Error("arena supervisor: free an unfinished build's allocation", "label", e.Label, "owner", e.Owner, "bytes", e.Bytes, "err", err)
		}
	}
	if s.arena != nil {
		s.register(c, s.arena)
	}
}

// register hands a built arena's slabs to the slab supervisor and the arena
// and its slabs to the release supervisor.
func (s *arenaSupervisor) register(c actor.Context, a *messages.Arena) {
	c.Send(s.release, &messages.RegisterArena{Arena: a})
	for _, sl := range a.Slabs {
		c.Send(s.slab, &messages.AdoptSlab{Slab: sl})
		c.Send(s.release, &messages.RegisterSlab{Slab: sl})
	}
}

func (s *arenaSupervisor) build(c actor.Context, m *messages.BuildArena) (*messages.Arena, error) {
	switch {
	case s.retired:
		return nil, fmt.Errorf("build arena: %w", ErrReleased)
	case s.arena != nil:
		return nil, fmt.Errorf("build arena: %w (%s, %s)", ErrArenaBuilt, s.arena.Plan.ModelType, arena.HumanBytes(s.arena.Plan.BufferBytes))
	case m.Plan == nil:
		return nil, fmt.Errorf("build arena: %w: nil plan", gpuworker.ErrInvalidValue)
	case m.Plan.TotalBytes <= 0:
		return nil, fmt.Errorf("build arena: %w: the plan has no buffers (total_bytes %d); make it with arena.PlanFor", gpuworker.ErrInvalidValue, m.Plan.TotalBytes)
	case m.Layout != "" && m.Layout != messages.LayoutPooled && m.Layout != messages.LayoutDiscrete:
		return nil, fmt.Errorf("build arena: layout %q: %w: want %q or %q", m.Layout, gpuworker.ErrInvalidValue, messages.LayoutPooled, messages.LayoutDiscrete)
	case m.Ctx != nil && m.Ctx.Err() != nil:
		return nil, fmt.Errorf("build arena: %w", m.Ctx.Err())
	}
	if err := checkSlabs(m.Plan); err != nil {
		return nil, fmt.Errorf("build arena: %w", err)
	}
	// From here on the build runs to its end whatever the caller's context
	// says: a half-built arena the caller gave up on would leak. A built arena
	// is registered for release even when nobody waits for it any more.
	a, err := s.allocate(m.Plan, m.Layout)
	if err == nil {
		s.cfg.hook("arena", PointBuildAllocated)
		// Tagging makes the build a built arena in the ledger, at once for
		// every allocation: a restarted supervisor finds it there.
		_, err = s.worker.TagOwners(uncancelled, planOwners(m.Plan), a)
	}
	if err != nil {
		if ferr := s.freeAll(m.Plan); ferr != nil {
			err = fmt.Errorf("%w (and the rollback failed: %v)", err, ferr)
		}
		return nil, fmt.Errorf("build arena (%s, %s; largest buffers: %s): %w",
			m.Plan.ModelType, arena.HumanBytes(m.Plan.TotalBytes), largest(m.Plan, 3), err)
	}
	s.cfg.hook("arena", PointBuilt)
	s.arena = a
	s.register(c, a)
	return a, nil
}

// checkSlabs refuses a plan whose slabs the slab supervisor could not tell
// apart or allocate: an empty or repeated name, a size ≤ 0.
func checkSlabs(plan *arena.Plan) error {
	seen := make(map[string]bool, len(plan.Slabs))
	for i, sl := range plan.Slabs {
		switch {
		case sl.Name == "":
			return fmt.Errorf("slab %d of %d: %w: empty name", i+1, len(plan.Slabs), gpuworker.ErrInvalidValue)
		case seen[sl.Name]:
			return fmt.Errorf("slab %q: %w: the plan names it twice", sl.Name, gpuworker.ErrInvalidValue)
		case sl.Bytes <= 0:
			return fmt.Errorf("slab %q (%d B): %w: size must be > 0", sl.Name, sl.Bytes, gpuworker.ErrInvalidValue)
		}
		seen[sl.Name] = true
	}
	return nil
}

// planOwners are the ledger owners of a plan's arena and slabs.
func planOwners(plan *arena.Plan) []string {
	owners := []string{messages.ArenaOwner}
	for _, spec := range plan.Slabs {
		owners = append(owners, messages.SlabOwner(spec.Name))
	}
	return owners
}

// allocate allocates the arena, its slabs, and zero-fills norm_unit_w
// (design.md §5: it must read as zeros before the first step).
func (s *arenaSupervisor) allocate(plan *arena.Plan, layout messages.Layout) (*messages.Arena, error) {
	var a *messages.Arena
	var err error
	if layout == messages.LayoutDiscrete {
		a, err = s.allocDiscrete(plan)
	} else {
		a, err = s.allocPooled(plan)
	}
	if err != nil {
		return nil, err
	}
	for _, spec := range plan.Slabs {
		ptr, err := s.worker.Alloc(uncancelled, messages.SlabOwner(spec.Name), spec.Name, spec.Bytes)
		if err != nil {
			return nil, fmt.Errorf("slab %s: %w", spec.Name, err)
		}
		a.Slabs = append(a.Slabs, messages.Slab{Name: spec.Name, Ptr: ptr, Bytes: spec.Bytes})
	}
	if p := a.Ptrs[arena.NormUnitW]; p != 0 {
		if err := s.worker.Memset(uncancelled, p, 0, a.Bytes(arena.NormUnitW)); err != nil {
			return nil, fmt.Errorf("zero-fill norm_unit_w: %w", err)
		}
	}
	return a, nil
}

// freeAll frees whatever a failed build allocated: everything the arena's
// and the plan's slabs' owners hold.
func (s *arenaSupervisor) freeAll(plan *arena.Plan) error {
	var first error
	for _, o := range planOwners(plan) {
		if _, err := s.worker.FreeOwner(uncancelled, o); err != nil && first == nil {
			first = err
		}
	}
	return first
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

func (s *arenaSupervisor) forward(m *messages.RunForward) messages.ForwardReply {
	switch {
	case m.Step == nil:
		return messages.ForwardReply{Err: fmt.Errorf("forward: %w: nil step", gpuworker.ErrInvalidValue)}
	case s.retired:
		return messages.ForwardReply{Err: fmt.Errorf("forward: %w", ErrReleased)}
	case s.arena == nil:
		return messages.ForwardReply{Err: fmt.Errorf("forward: %w", ErrNoArena)}
	}
	s.cfg.hook("arena", PointForward)
	a := s.arena
	d, err := s.worker.Forward(m.Ctx, func(dev messages.Device) error { return m.Step(a, dev) })
	return messages.ForwardReply{Duration: d, Err: err}
}

// allocPooled allocates the plan's buffers as one pool.
func (s *arenaSupervisor) allocPooled(plan *arena.Plan) (*messages.Arena, error) {
	layout, err := arena.NewPoolLayout(plan)
	if err != nil {
		return nil, err
	}
	var views []messages.PoolView
	for _, id := range arena.BufferIDs() {
		if off := layout.Offsets[id]; off >= 0 {
			views = append(views, messages.PoolView{Label: id.String(), Offset: off, Bytes: plan.Buffers[id].Bytes})
		}
	}
	pool, err := s.worker.AllocPool(uncancelled, messages.ArenaOwner, messages.PoolLabel, layout.Bytes, views)
	if err != nil {
		return nil, err
	}
	a := &messages.Arena{Plan: plan, Layout: messages.LayoutPooled, Pool: pool, PoolBytes: layout.Bytes}
	for _, id := range arena.BufferIDs() {
		if off := layout.Offsets[id]; off >= 0 {
			a.Ptrs[id] = pool + messages.DevicePtr(off)
		}
	}
	return a, nil
}

// allocDiscrete allocates each present buffer on its own, in one
// all-or-nothing batch.
func (s *arenaSupervisor) allocDiscrete(plan *arena.Plan) (*messages.Arena, error) {
	var ids []arena.BufferID
	var items []messages.AllocItem
	for _, id := range arena.BufferIDs() {
		if b := plan.Buffers[id]; b.Present() {
			ids = append(ids, id)
			items = append(items, messages.AllocItem{Label: id.String(), Bytes: b.Bytes})
		}
	}
	ptrs, err := s.worker.AllocBatch(uncancelled, messages.ArenaOwner, items)
	if err != nil {
		return nil, err
	}
	a := &messages.Arena{Plan: plan, Layout: messages.LayoutDiscrete}
	for i, id := range ids {
		a.Ptrs[id] = ptrs[i]
	}
	return a, nil
}
