package gpuworker

import (
	"fmt"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// allocBatch allocates every item of m, records its views, zero-fills its
// zero ranges and tags the allocations with m.Tag's result, or does none of
// it: on a failure it frees what it allocated, newest first.
func (a *gpuActor) allocBatch(m *messages.AllocBatch) messages.AllocBatchReply {
	if err := a.usable(m.Ctx); err != nil {
		return messages.AllocBatchReply{Err: err}
	}
	ptrs := make([]device.DevicePtr, 0, len(m.Items))
	item := func(k int, err error) error { return fmt.Errorf("batch item %d of %d: %w", k+1, len(m.Items), err) }
	fail := func(err error) messages.AllocBatchReply {
		if rerr := a.rollback(ptrs); rerr != nil {
			err = fmt.Errorf("%w (and the rollback failed: %v)", err, rerr)
		}
		return messages.AllocBatchReply{Err: err}
	}
	var total int64
	for k, it := range m.Items {
		if err := checkItem(it); err != nil {
			return messages.AllocBatchReply{Err: item(k, err)}
		}
		if m.Preflight != "" {
			sum, err := arena.CheckedAdd("batch bytes", total, it.Bytes)
			if err != nil {
				return messages.AllocBatchReply{Err: fmt.Errorf("%s: %w: %w", m.Preflight, ErrInvalidValue, err)}
			}
			total = sum
		}
	}
	if m.Preflight != "" && a.overBudget(total) {
		a.ledger.failed()
		return messages.AllocBatchReply{Err: a.outOfMemory(m.Owner, m.Preflight, total, true, nil)}
	}
	for k, it := range m.Items {
		owner := it.Owner
		if owner == "" {
			owner = m.Owner
		}
		ptr, err := a.allocate(owner, it.Label, it.Bytes)
		if err != nil {
			return fail(item(k, err))
		}
		ptrs = append(ptrs, ptr)
		a.ledger.addViews(ptr, it.Views)
	}
	for k, it := range m.Items {
		for _, z := range it.Zero {
			p := ptrs[k] + device.DevicePtr(z.Offset)
			if err := a.guard("zero-fill", it.Label, func() error { return a.backend.Memset(p, 0, z.Bytes) }); err != nil {
				return fail(item(k, fmt.Errorf("zero-fill %s at offset %d (%d B): %w", rangeName(it, z), z.Offset, z.Bytes, err)))
			}
		}
	}
	r := messages.AllocBatchReply{Ptrs: ptrs}
	if m.Tag != nil {
		tag, err := runTag(m.Tag, ptrs)
		if err != nil {
			return fail(fmt.Errorf("tag the batch of %d: %w", len(m.Items), err))
		}
		r.Tag = tag
		for _, p := range ptrs {
			a.ledger.entries[p].Tag = tag
		}
	}
	return r
}

// runTag runs a batch's tag function, turning a panic into ErrTagPanic: the
// function is the caller's code, and its bug fails the batch, not the GPU
// actor.
func runTag(tag func([]device.DevicePtr) any, ptrs []device.DevicePtr) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrTagPanic, r)
		}
	}()
	return tag(ptrs), nil
}

// rangeName names a zero range for an error: the item's label, and the view
// the range starts in when there is one ("POOL/VIEW").
func rangeName(it messages.AllocItem, z messages.ByteRange) string {
	for _, v := range it.Views {
		if z.Offset >= v.Offset && z.Offset < v.Offset+v.Bytes {
			return it.Label + "/" + v.Label
		}
	}
	return it.Label
}

// checkItem verifies, before anything is allocated, that an item's size is
// > 0 and that its views and zero ranges lie inside it; views must also be
// in increasing offset order and not overlap.
func checkItem(it messages.AllocItem) error {
	if it.Bytes <= 0 {
		return fmt.Errorf("alloc %s (%d B): %w: size must be > 0", it.Label, it.Bytes, ErrInvalidValue)
	}
	var end int64
	for _, v := range it.Views {
		if v.Bytes <= 0 || v.Offset < end || v.Offset > it.Bytes-v.Bytes {
			return fmt.Errorf("pool %s (%d B): view %s at offset %d (%d B) after offset %d: %w: views must be non-empty, in order, inside the pool and not overlap",
				it.Label, it.Bytes, v.Label, v.Offset, v.Bytes, end, ErrInvalidValue)
		}
		end = v.Offset + v.Bytes
	}
	for _, z := range it.Zero {
		if z.Bytes <= 0 || z.Offset < 0 || z.Offset > it.Bytes-z.Bytes {
			return fmt.Errorf("%s (%d B): zero range at offset %d (%d B): %w: a zero range must be non-empty and inside the allocation",
				it.Label, it.Bytes, z.Offset, z.Bytes, ErrInvalidValue)
		}
	}
	return nil
}

// rollback frees ptrs newest first, keeping going after an error. It runs
// even after a backend panic, as the actor's teardown does: a build is all
// or nothing (design.md §7, invariant 4).
func (a *gpuActor) rollback(ptrs []device.DevicePtr) error {
	var first error
	for i := len(ptrs) - 1; i >= 0; i-- {
		if err := a.release(ptrs[i]); err != nil && first == nil {
			first = err
		}
	}
	return first
}
