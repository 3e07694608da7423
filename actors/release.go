package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// releaseSupervisor frees every registered resource. Release walks the
// resources in reverse order of registration and each discrete arena's buffer
// table backwards (by BufferID, so a new buffer cannot be forgotten; a pooled
// arena is one allocation; a discrete one is freed in one FreeBatch request),
// keeps going after an error and returns the first.
// What it freed it forgets, so a second Release never frees twice; what failed
// it keeps, so a second Release retries exactly that.
//
// On *actor.Started (the first start and every restart) it rebuilds its
// resource list from the ledger: what is still live of the built arena (the
// allocations tagged with it) and of its slabs. A registration of a resource
// it already has is ignored.
type releaseSupervisor struct {
	worker    *gpuworker.Worker
	cfg       config
	resources []resource
}

// resource is one registered arena or slab.
type resource struct {
	owner string
	// origin is the built arena the resource belongs to: the registration's
	// identity, so one sent again is recognised.
	origin *device.Arena
	arena  *device.Arena // set for an arena: what of it is left to free
	slab   device.Slab   // set for a slab
}

// Receive handles Started, RegisterArena and Release.
func (s *releaseSupervisor) Receive(c actor.Context) {
	defer answerPanic("release", s.cfg.logger, c.Message())
	s.cfg.received("release", c.Message())
	switch m := c.Message().(type) {
	case *actor.Started:
		s.rebuild()
		s.cfg.hook("release", PointStarted)
	case *messages.RegisterArena:
		s.add(resource{owner: device.ArenaOwner, origin: m.Arena, arena: m.Arena})
		for _, sl := range m.Arena.Slabs {
			s.add(resource{owner: device.SlabOwner(sl.Name), slab: sl})
		}
	case *messages.Release:
		r := s.releaseAll()
		if r.Err == nil && m.RetireErr != nil {
			r.Err = fmt.Errorf("release: record the retirement in the ledger: %w", m.RetireErr)
		}
		m.Reply <- r
	}
}

// rebuild reads what is still live of the built arena and its slabs from
// the ledger, in registration order: the arena, then its slabs.
func (s *releaseSupervisor) rebuild() {
	st, err := readLedger(s.worker)
	if err != nil {
		s.cfg.logger.Warn("release supervisor: cannot read the ledger", "err", err)
		return
	}
	a := st.arena
	if a == nil {
		return
	}
	if a.Pool != 0 {
		if _, live := st.live[a.Pool]; live {
			s.add(resource{owner: device.ArenaOwner, origin: a, arena: a})
		}
	} else {
		left := &device.Arena{Plan: a.Plan, Layout: a.Layout}
		held := false
		for id, ptr := range a.Ptrs {
			if _, live := st.live[ptr]; ptr != 0 && live {
				left.Ptrs[id], held = ptr, true
			}
		}
		if held {
			s.add(resource{owner: device.ArenaOwner, origin: a, arena: left})
		}
	}
	for _, sl := range a.Slabs {
		if _, live := st.live[sl.Ptr]; live {
			s.add(resource{owner: device.SlabOwner(sl.Name), slab: sl})
		}
	}
}

// add registers res unless it is registered already.
func (s *releaseSupervisor) add(res resource) {
	for _, r := range s.resources {
		if r.owner == res.owner && ((res.arena != nil && r.arena != nil && r.origin == res.origin) ||
			(res.arena == nil && r.arena == nil && r.slab.Ptr == res.slab.Ptr)) {
			return
		}
	}
	s.resources = append(s.resources, res)
}

func (s *releaseSupervisor) releaseAll() messages.ReleaseReply {
	start := time.Now()
	var r messages.ReleaseReply
	var kept []resource
	for i := len(s.resources) - 1; i >= 0; i-- {
		res := s.resources[i]
		if left := s.releaseOne(&r, res); left != nil {
			kept = append([]resource{*left}, kept...)
		}
		if i > 0 {
			s.cfg.hook("release", PointReleased)
		}
	}
	s.resources = kept
	r.Duration = time.Since(start)
	return r
}

// releaseOne frees one resource and returns what of it is still held (nil when
// all of it was freed).
func (s *releaseSupervisor) releaseOne(r *messages.ReleaseReply, res resource) *resource {
	note := func(bytes int64, err error) bool {
		if err != nil {
			if r.Err == nil {
				r.Err = err
			}
			return false
		}
		r.Freed++
		r.Bytes += bytes
		return true
	}
	switch {
	case res.arena == nil:
		if note(res.slab.Bytes, s.free(res.owner, res.slab.Ptr)) {
			return nil
		}
		return &res
	case res.arena.Pool != 0:
		if note(res.arena.PoolBytes, s.free(res.owner, res.arena.Pool)) {
			return nil
		}
		return &res
	}
	return s.releaseDiscrete(r, res)
}

// releaseDiscrete frees every buffer of a discrete arena, the buffer table
// walked backwards, in one request, and returns what of it is still held
// (nil when all of it was freed).
func (s *releaseSupervisor) releaseDiscrete(r *messages.ReleaseReply, res resource) *resource {
	ids := arena.BufferIDs()
	var order []arena.BufferID // the buffers, in the order freed
	var ptrs []device.DevicePtr
	for i := len(ids) - 1; i >= 0; i-- {
		if ptr := res.arena.Ptrs[ids[i]]; ptr != 0 {
			order, ptrs = append(order, ids[i]), append(ptrs, ptr)
		}
	}
	// failed keeps the order of ptrs: walk both at once.
	failed, err := s.worker.FreeBatch(uncancelled, res.owner, ptrs)
	if err != nil && r.Err == nil {
		r.Err = err
	}
	var left *device.Arena
	for i, ptr := range ptrs {
		if len(failed) > 0 && failed[0] == ptr {
			failed = failed[1:]
			if left == nil {
				left = &device.Arena{Plan: res.arena.Plan, Layout: res.arena.Layout}
			}
			left.Ptrs[order[i]] = ptr
			continue
		}
		r.Freed++
		r.Bytes += res.arena.Bytes(order[i])
	}
	if left == nil {
		return nil
	}
	return &resource{owner: res.owner, origin: res.origin, arena: left}
}

// free frees ptr with no context: once started, a release is never cut short.
func (s *releaseSupervisor) free(owner string, ptr device.DevicePtr) error {
	return s.worker.Free(uncancelled, owner, ptr)
}
