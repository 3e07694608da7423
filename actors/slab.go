package actors

import (
	"fmt"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/messages"
)

// DefaultSlabAlign is the alignment of a carve when the request names none, in
// bytes (cudaMalloc's own alignment).
const DefaultSlabAlign = 256

// slabSupervisor carves the slabs the arena supervisor allocated. Its mailbox takes one message
// at a time, so two carves never race for the same bytes.
type slabSupervisor struct {
	slabs   map[string]*slabState
	retired bool
}

type slabState struct {
	messages.Slab
	used int64
}

// Receive handles AdoptSlab, CarveSlab and RetireSlabs.
func (s *slabSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.AdoptSlab:
		if s.slabs == nil {
			s.slabs = make(map[string]*slabState)
		}
		s.slabs[m.Slab.Name] = &slabState{Slab: m.Slab}
	case *messages.CarveSlab:
		m.Reply <- s.carve(m)
	case *messages.RetireSlabs:
		s.retired = true
		m.Reply <- nil
	}
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
