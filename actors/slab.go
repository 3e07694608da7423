package actors

import (
	"fmt"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// DefaultSlabAlign is the alignment of a carve when the request names none, in
// bytes (cudaMalloc's own alignment).
const DefaultSlabAlign = 256

// slabSupervisor creates slabs and carves them. Its mailbox takes one message
// at a time, so two carves never race for the same bytes.
type slabSupervisor struct {
	worker  *gpuworker.Worker
	release *actor.PID

	slabs   map[string]*slabState
	retired bool
}

type slabState struct {
	messages.Slab
	used int64
}

// Receive handles CreateSlab, CarveSlab and RetireSlabs.
func (s *slabSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.CreateSlab:
		m.Reply <- s.create(c, m)
	case *messages.CarveSlab:
		m.Reply <- s.carve(m)
	case *messages.RetireSlabs:
		s.retired = true
		m.Reply <- nil
	}
}

func (s *slabSupervisor) create(c actor.Context, m *messages.CreateSlab) error {
	if s.retired {
		return fmt.Errorf("create slab %s: %w", m.Name, ErrReleased)
	}
	if _, ok := s.slabs[m.Name]; ok {
		return fmt.Errorf("create slab %s (%d B): %w", m.Name, m.Bytes, ErrSlabExists)
	}
	if m.Ctx != nil && m.Ctx.Err() != nil {
		return fmt.Errorf("create slab %s: %w", m.Name, m.Ctx.Err())
	}
	// Like the arena build, an allocation once asked for is always awaited
	// and registered, so it can never leak.
	ptr, err := s.worker.Alloc(nil, messages.SlabOwner(m.Name), m.Name, m.Bytes)
	if err != nil {
		return fmt.Errorf("create slab: %w", err)
	}
	st := &slabState{Slab: messages.Slab{Name: m.Name, Ptr: ptr, Bytes: m.Bytes}}
	if s.slabs == nil {
		s.slabs = make(map[string]*slabState)
	}
	s.slabs[m.Name] = st
	c.Send(s.release, &messages.RegisterSlab{Slab: st.Slab})
	return nil
}

func (s *slabSupervisor) carve(m *messages.CarveSlab) messages.CarveSlabReply {
	if s.retired {
		return messages.CarveSlabReply{Err: fmt.Errorf("carve %d B from slab %s: %w", m.Bytes, m.Name, ErrReleased)}
	}
	st, ok := s.slabs[m.Name]
	if !ok {
		return messages.CarveSlabReply{Err: fmt.Errorf("carve %d B from slab %q: %w (slabs: %s)", m.Bytes, m.Name, arena.ErrSlabAbsent, s.names())}
	}
	align := m.Align
	if align == 0 {
		align = DefaultSlabAlign
	}
	off, used, err := arena.CarveSlab(st.Bytes, st.used, m.Bytes, align)
	if err != nil {
		return messages.CarveSlabReply{Err: fmt.Errorf("carve from slab %s: %w", m.Name, err)}
	}
	st.used = used
	return messages.CarveSlabReply{Ptr: st.Ptr + messages.DevicePtr(off), Offset: off}
}

func (s *slabSupervisor) names() string {
	if len(s.slabs) == 0 {
		return "none"
	}
	names := make([]string, 0, len(s.slabs))
	for n, st := range s.slabs {
		names = append(names, fmt.Sprintf("%s %d B", n, st.Bytes))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
