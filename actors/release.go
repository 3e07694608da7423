package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// releaseSupervisor frees every registered resource. Release walks the
// resources in reverse order of registration and each discrete arena's buffer
// table backwards (by BufferID, so a new buffer cannot be forgotten; a pooled
// arena is one allocation), keeps going after an error and returns the first. What it freed it forgets, so a second
// Release never frees twice; what failed it keeps, so a second Release retries
// exactly that.
type releaseSupervisor struct {
	worker    *gpuworker.Worker
	resources []resource
}

// resource is one registered arena or slab.
type resource struct {
	owner string
	arena *messages.Arena // set for an arena
	slab  messages.Slab   // set for a slab
}

// Receive handles RegisterArena, RegisterSlab and Release.
func (s *releaseSupervisor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.RegisterArena:
		s.resources = append(s.resources, resource{owner: messages.ArenaOwner, arena: m.Arena})
	case *messages.RegisterSlab:
		s.resources = append(s.resources, resource{owner: messages.SlabOwner(m.Slab.Name), slab: m.Slab})
	case *messages.Release:
		m.Reply <- s.releaseAll()
	}
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
	var left *messages.Arena
	ids := arena.BufferIDs()
	for i := len(ids) - 1; i >= 0; i-- {
		id := ids[i]
		ptr := res.arena.Ptrs[id]
		if ptr == 0 {
			continue
		}
		if !note(res.arena.Bytes(id), s.free(res.owner, ptr)) {
			if left == nil {
				left = &messages.Arena{Plan: res.arena.Plan}
			}
			left.Ptrs[id] = ptr
		}
	}
	if left == nil {
		return nil
	}
	return &resource{owner: res.owner, arena: left}
}

// free frees ptr with no context: once started, a release is never cut short.
func (s *releaseSupervisor) free(owner string, ptr messages.DevicePtr) error {
	return s.worker.Free(nil, owner, ptr)
}
