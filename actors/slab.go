package actors

import (
	"fmt"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// DefaultSlabAlign is the alignment of a carve when the request names none, in
// bytes (cudaMalloc's own alignment).
const DefaultSlabAlign = 256

// slabSupervisor carves the slabs the arena supervisor allocated. Its mailbox
// takes one message at a time, so two carves never race for the same bytes.
//
// Every carve is recorded in the ledger as a view of its slab before it is
// handed out, so a restarted slab supervisor reads each slab's carved bytes
// back from the ledger (rebuild) and never hands out bytes twice.
type slabSupervisor struct {
	worker  *gpuworker.Worker
	cfg     config
	release *actor.PID
	slabs   map[string]*slabState
	retired bool
}

type slabState struct {
	device.Slab
	used int64
}

// Receive handles Started, RegisterArena (adopt its slabs), CarveSlab,
// Release (its part: retire the slabs, then hand the release to the release
// supervisor) and ResetArena (the reset's last part: carve again once a new
// arena registers its slabs).
func (s *slabSupervisor) Receive(c actor.Context) {
	defer answerPanic("slab", s.cfg.logger, c.Message())
	s.cfg.received("slab", c.Message())
	switch m := c.Message().(type) {
	case *actor.Started:
		s.rebuild()
		s.cfg.hook("slab", PointStarted)
	case *messages.RegisterArena:
		for _, sl := range m.Arena.Slabs {
			s.adopt(sl, 0)
		}
	case *messages.CarveSlab:
		if err := s.cfg.refusing("carve slab"); err != nil {
			m.Reply <- messages.CarveSlabReply{Err: err}
			return
		}
		m.Reply <- s.carve(m)
	case *messages.Release:
		s.retired = true
		c.Send(s.release, m)
	case *messages.ResetArena:
		// After the arena supervisor's part: the released slabs are freed.
		s.retired, s.slabs = false, nil
		m.Reply <- nil
	}
}

// rebuild reads the built arena's slabs, and how far each is carved, from
// the ledger.
func (s *slabSupervisor) rebuild() {
	st, err := readLedger(s.worker)
	if err != nil {
		s.cfg.logger.Warn("slab supervisor: cannot read the ledger", "err", err)
		return
	}
	s.retired = st.retired
	if st.arena == nil {
		return
	}
	for _, sl := range st.arena.Slabs {
		if _, live := st.live[sl.Ptr]; live {
			s.adopt(sl, st.carved(sl))
		}
	}
}

// adopt starts carving sl at used bytes, unless the supervisor carves it
// already (the arena registered again after the arena supervisor restarted).
func (s *slabSupervisor) adopt(sl device.Slab, used int64) {
	if s.slabs == nil {
		s.slabs = make(map[string]*slabState)
	}
	if st, ok := s.slabs[sl.Name]; ok && st.Ptr == sl.Ptr {
		return
	}
	s.slabs[sl.Name] = &slabState{Slab: sl, used: used}
}

func (s *slabSupervisor) carve(m *messages.CarveSlab) messages.CarveSlabReply {
	if m.Ctx != nil && m.Ctx.Err() != nil {
		return messages.CarveSlabReply{Err: fmt.Errorf("carve %d B from slab %s: %w", m.Bytes, m.Name, m.Ctx.Err())}
	}
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
	// Record the carve before handing it out, with no context: once started,
	// a carve is either recorded and answered, or neither.
	view := messages.PoolView{Label: fmt.Sprintf("%s carve@%d", m.Name, off), Offset: off, Bytes: m.Bytes}
	if err := s.worker.AddView(uncancelled, device.SlabOwner(m.Name), st.Ptr, view); err != nil {
		return messages.CarveSlabReply{Err: fmt.Errorf("carve %d B from slab %s: %w", m.Bytes, m.Name, err)}
	}
	st.used = used
	s.cfg.hook("slab", PointCarved)
	return messages.CarveSlabReply{Ptr: st.Ptr + device.DevicePtr(off), Offset: off}
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
