package arena

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
	for _, id := range BufferIDs() {
		b := plan.Buffers[id]
		if !b.Present() {
			l.Offsets[id] = -1
			continue
		}
		off, err := alignUp("pool offset of "+id.String(), end, PoolAlign)
		if err != nil {
			return PoolLayout{}, err
		}
		l.Offsets[id] = off
		if end, err = CheckedAdd("pool end of "+id.String(), off, b.Bytes); err != nil {
			return PoolLayout{}, err
		}
	}
	var err error
	if l.Bytes, err = alignUp("pool size", end, PoolAlign); err != nil {
		return PoolLayout{}, err
	}
	l.WasteBytes = l.Bytes - plan.BufferBytes
	return l, nil
}
