package arena

import "errors"

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
// allocations) in one pool. Errors: an *OverflowError.
func NewPoolLayout(plan *Plan) (PoolLayout, error) {
	var l PoolLayout
	var end int64
	for id := range NumBuffers {
		b := plan.Buffers[id]
		if !b.Present() {
			l.Offsets[id] = -1
			continue
		}
		off, err := alignUp("pool offset", end, PoolAlign)
		if err != nil {
			return PoolLayout{}, naming(err, id)
		}
		l.Offsets[id] = off
		if end, err = CheckedAdd("pool end", off, b.Bytes); err != nil {
			return PoolLayout{}, naming(err, id)
		}
	}
	var err error
	if l.Bytes, err = alignUp("pool size", end, PoolAlign); err != nil {
		return PoolLayout{}, err
	}
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
