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
type arenaSupervisor struct {
	worker  *gpuworker.Worker
	release *actor.PID
	slab    *actor.PID

	arena   *messages.Arena
	retired bool
}

// Receive handles BuildArena, RunForward and RetireArena.
func (s *arenaSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.BuildArena:
		a, err := s.build(c, m)
		m.Reply <- messages.BuildArenaReply{Arena: a, Err: err}
	case *messages.RunForward:
		m.Reply <- s.forward(m)
	case *messages.RetireArena:
		s.retired = true
		m.Reply <- nil
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
	case m.Layout != "" && m.Layout != messages.LayoutPooled && m.Layout != messages.LayoutDiscrete:
		return nil, fmt.Errorf("build arena: layout %q: %w: want %q or %q", m.Layout, gpuworker.ErrInvalidValue, messages.LayoutPooled, messages.LayoutDiscrete)
	case m.Ctx != nil && m.Ctx.Err() != nil:
		return nil, fmt.Errorf("build arena: %w", m.Ctx.Err())
	}
	// From here on the build runs to its end whatever the caller's context
	// says: a half-built arena the caller gave up on would leak. A built arena
	// is registered for release even when nobody waits for it any more.
	a, err := s.allocate(m.Plan, m.Layout)
	if err != nil {
		if ferr := s.freeAll(m.Plan); ferr != nil {
			err = fmt.Errorf("%w (and the rollback failed: %v)", err, ferr)
		}
		return nil, fmt.Errorf("build arena (%s, %s; largest buffers: %s): %w",
			m.Plan.ModelType, arena.HumanBytes(m.Plan.TotalBytes), largest(m.Plan, 3), err)
	}
	s.arena = a
	c.Send(s.release, &messages.RegisterArena{Arena: a})
	for _, sl := range a.Slabs {
		c.Send(s.slab, &messages.AdoptSlab{Slab: sl})
		c.Send(s.release, &messages.RegisterSlab{Slab: sl})
	}
	return a, nil
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
		ptr, err := s.worker.Alloc(nil, messages.SlabOwner(spec.Name), spec.Name, spec.Bytes)
		if err != nil {
			return nil, fmt.Errorf("slab %s: %w", spec.Name, err)
		}
		a.Slabs = append(a.Slabs, messages.Slab{Name: spec.Name, Ptr: ptr, Bytes: spec.Bytes})
	}
	if p := a.Ptrs[arena.NormUnitW]; p != 0 {
		if err := s.worker.Memset(nil, p, 0, a.Bytes(arena.NormUnitW)); err != nil {
			return nil, fmt.Errorf("zero-fill norm_unit_w: %w", err)
		}
	}
	return a, nil
}

// freeAll frees whatever a failed build allocated: everything the arena's
// and the plan's slabs' owners hold.
func (s *arenaSupervisor) freeAll(plan *arena.Plan) error {
	owners := []string{messages.ArenaOwner}
	for _, spec := range plan.Slabs {
		owners = append(owners, messages.SlabOwner(spec.Name))
	}
	var first error
	for _, o := range owners {
		if _, err := s.worker.FreeOwner(nil, o); err != nil && first == nil {
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
	case s.retired:
		return messages.ForwardReply{Err: fmt.Errorf("forward: %w", ErrReleased)}
	case s.arena == nil:
		return messages.ForwardReply{Err: fmt.Errorf("forward: %w", ErrNoArena)}
	}
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
	pool, err := s.worker.AllocPool(nil, messages.ArenaOwner, messages.PoolLabel, layout.Bytes, views)
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
	ptrs, err := s.worker.AllocBatch(nil, messages.ArenaOwner, items)
	if err != nil {
		return nil, err
	}
	a := &messages.Arena{Plan: plan, Layout: messages.LayoutDiscrete}
	for i, id := range ids {
		a.Ptrs[id] = ptrs[i]
	}
	return a, nil
}
