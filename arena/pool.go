package arena

import (
	"errors"
	"fmt"
)

// PoolAlign is the alignment of every buffer inside a pooled arena, in bytes:
// cudaMalloc's own guarantee (256 B), enough for any vectorised load.
const PoolAlign = 256

// PoolLayout places every present buffer of a plan in one allocation, in
// BufferID order, each at a PoolAlign-aligned offset.
type PoolLayout struct {
	// Offsets is indexed by BufferID: the buffer's byte offset in the pool;
	// -1 for an absent buffer.
	Offsets [NumBuffers]int64
	// Bytes is the pool's size: the end of the last buffer, rounded up to
	// PoolAlign.
	Bytes int64
	// WasteBytes is Bytes minus the sum of the buffers: alignment padding.
	WasteBytes int64
}

// NewPoolLayout lays out plan's buffers (not its slabs, which stay separate
// allocations) in one pool, by PoolOffsets' rule. Errors: an *OverflowError.
func NewPoolLayout(plan *Plan) (PoolLayout, error) {
	var l PoolLayout
	var sizes [NumBuffers]int64
	for id := range NumBuffers {
		sizes[id] = plan.Buffers[id].Bytes
	}
	total, at, err := layOut(sizes[:], l.Offsets[:])
	if err != nil {
		if at >= 0 {
			err = naming(err, BufferID(at))
		}
		return PoolLayout{}, err
	}
	l.Bytes = total
	l.WasteBytes = l.Bytes - plan.BufferBytes
	return l, nil
}

// naming adds the buffer's name to an overflow error's What ("pool offset
// of logits"), on the error path only: a layout is made on every build.
func naming(err error, id BufferID) error {
	var o *OverflowError
	if errors.As(err, &o) {
		o.What += " of " + id.String()
	}
	return err
}

// PoolOffsets lays out items of sizes (in bytes, each ≥ 0) in one pooled
// allocation, the rule the pooled arena and the pooled weights both use:
// in order, each non-empty item at the first PoolAlign-aligned offset past
// the previous one's end; an empty item gets no memory and offset -1.
// total is the pool's size in bytes: the last item's end rounded up to
// PoolAlign, 0 when every item is empty. Since each item starts aligned,
// total is the sum of the non-empty sizes each rounded up to PoolAlign,
// whatever their order.
//
// Errors: an *OptionError ("item_bytes") for a negative size; an
// *OverflowError when an offset or the total passes 2^63−1.
func PoolOffsets(sizes []int64) (offsets []int64, total int64, err error) {
	for i, n := range sizes {
		if n < 0 {
			return nil, 0, &OptionError{Option: "item_bytes", Value: n, Reason: fmt.Sprintf("item %d must not be negative", i)}
		}
	}
	offsets = make([]int64, len(sizes))
	if total, _, err = layOut(sizes, offsets); err != nil {
		return nil, 0, err
	}
	return offsets, total, nil
}

// layOut is the pool rule of PoolOffsets and NewPoolLayout: it writes each
// item's offset into offsets (len(sizes) of them; -1 for an item of ≤ 0
// bytes) and returns the pool's size. On an *OverflowError, at is the
// index of the item whose offset or end overflowed, -1 for the total.
func layOut(sizes, offsets []int64) (total int64, at int, err error) {
	var end int64
	for i, n := range sizes {
		if n <= 0 {
			offsets[i] = -1
			continue
		}
		off, err := alignUp("pool offset", end, PoolAlign)
		if err != nil {
			return 0, i, err
		}
		offsets[i] = off
		if end, err = CheckedAdd("pool end", off, n); err != nil {
			return 0, i, err
		}
	}
	total, err = alignUp("pool size", end, PoolAlign)
	return total, -1, err
}

// PooledBytes is the size in bytes of one pooled allocation holding items of
// sizes (PoolOffsets' total): what a pooled weights load allocates for a
// checkpoint's tensors. PooledBytes(sizes) − the sum of sizes is the pool's
// alignment padding. Errors: PoolOffsets'.
func PooledBytes(sizes []int64) (int64, error) {
	_, total, err := PoolOffsets(sizes)
	return total, err
}
