package actors

import (
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// arenaBatch is a plan's arena as one AllocBatch: the pool (pooled: one item
// whose views are the buffers) or one item per present buffer (discrete),
// then one item per slab, held by the slab's owner. The bytes of every buffer
// whose BufferID.ZeroFill is true are a zero range.
type arenaBatch struct {
	plan    *arena.Plan
	layout  device.Layout
	items   []messages.AllocItem
	buffers []arena.BufferID // discrete: the buffer of each item before the slabs
	offsets [arena.NumBuffers]int64
}

// newArenaBatch lays plan out with layout ("" is pooled). plan must have
// passed arena.Plan.Validate (build checks it, once for both layouts): the
// layouts trust its bytes — an absent buffer is one with 0 B — and its totals.
func newArenaBatch(plan *arena.Plan, layout device.Layout) (*arenaBatch, error) {
	b := &arenaBatch{plan: plan, layout: layout}
	if layout == device.LayoutDiscrete {
		for _, id := range arena.BufferIDs() {
			if buf := plan.Buffers[id]; buf.Present() {
				it := messages.AllocItem{Label: id.String(), Bytes: buf.Bytes}
				if id.ZeroFill() {
					it.Zero = []messages.ByteRange{{Offset: 0, Bytes: buf.Bytes}}
				}
				b.buffers, b.items = append(b.buffers, id), append(b.items, it)
			}
		}
	} else {
		b.layout = device.LayoutPooled
		pool, err := arena.NewPoolLayout(plan)
		if err != nil {
			return nil, err
		}
		b.offsets = pool.Offsets
		it := messages.AllocItem{Label: device.PoolLabel, Bytes: pool.Bytes, Views: make([]messages.PoolView, 0, arena.NumBuffers)}
		for _, id := range arena.BufferIDs() {
			if off := pool.Offsets[id]; off >= 0 {
				it.Views = append(it.Views, messages.PoolView{Label: id.String(), Offset: off, Bytes: plan.Buffers[id].Bytes})
				if id.ZeroFill() {
					it.Zero = append(it.Zero, messages.ByteRange{Offset: off, Bytes: plan.Buffers[id].Bytes})
				}
			}
		}
		b.items = append(b.items, it)
	}
	for _, spec := range plan.Slabs {
		b.items = append(b.items, messages.AllocItem{Owner: device.SlabOwner(spec.Name), Label: spec.Name, Bytes: spec.Bytes})
	}
	return b, nil
}

// builtArena is a built arena as the supervisors hold it, and the tag of its
// allocations in the ledger (AllocBatch's Tag): own is the supervisors'
// copy, registered with the slab and release supervisors and released;
// shared is the copy handed to the caller of BuildArena and to every forward
// step. Both are made once, on the GPU thread, when the build's allocations
// are tagged, and never changed, so a supervisor restarted after the build
// reads both back from the ledger and hands out the same copy (design.md
// §8.17).
type builtArena struct {
	own    *device.Arena
	shared *device.Arena
}

// newBuiltArena pairs a with a copy of it to hand out.
func newBuiltArena(a *device.Arena) *builtArena {
	return &builtArena{own: a, shared: a.Clone()}
}

// arena is the built arena, from the batch's pointers (one per item, in order).
func (b *arenaBatch) arena(ptrs []device.DevicePtr) *device.Arena {
	a := &device.Arena{Plan: b.plan, Layout: b.layout}
	n := len(b.buffers)
	if b.layout == device.LayoutPooled {
		n = 1
		a.Pool, a.PoolBytes = ptrs[0], b.items[0].Bytes
		for _, id := range arena.BufferIDs() {
			if off := b.offsets[id]; off >= 0 {
				a.Ptrs[id] = a.Pool + device.DevicePtr(off)
			}
		}
	} else {
		for i, id := range b.buffers {
			a.Ptrs[id] = ptrs[i]
		}
	}
	for i, spec := range b.plan.Slabs {
		a.Slabs = append(a.Slabs, device.Slab{Name: spec.Name, Ptr: ptrs[n+i], Bytes: spec.Bytes})
	}
	return a
}
