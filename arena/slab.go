package arena

import (
	"errors"
	"fmt"
)

// Slab carve errors, each wrapped by a *SlabError that names the sizes.
var (
	// ErrSlabExhausted: the carve does not fit in what is left of the slab.
	ErrSlabExhausted = errors.New("arena: slab exhausted")
	// ErrSlabAbsent: the slab has no bytes (the plan has no such slab).
	ErrSlabAbsent = errors.New("arena: slab absent")
	// ErrInvalidCarve: a carve of ≤ 0 bytes, an alignment that is not a
	// positive power of two, or a used count outside [0, capacity].
	ErrInvalidCarve = errors.New("arena: invalid slab carve")
)

// SlabError is a refused carve: what was asked and the slab's state, in bytes.
// It unwraps to ErrSlabExhausted, ErrSlabAbsent or ErrInvalidCarve.
type SlabError struct {
	// Asked is the bytes asked for; Align their alignment.
	Asked, Align int64
	// Used is the bytes already carved; Capacity the slab's size.
	Used, Capacity int64
	// Err is the sentinel.
	Err error
}

// Error names the sentinel, the bytes asked, the alignment and the slab's used,
// capacity and remaining bytes.
func (e *SlabError) Error() string {
	return fmt.Sprintf("%v: asked %d B (align %d) with %d of %d B used (%d B left)",
		e.Err, e.Asked, e.Align, e.Used, e.Capacity, max(e.Capacity-e.Used, 0))
}

// Unwrap returns the sentinel.
func (e *SlabError) Unwrap() error { return e.Err }

// CarveSlab carves n bytes aligned to align from a bump-only slab of capacity
// bytes of which used are taken: offset is the carve's byte offset, newUsed
// the slab's new used count (offset + n). Nothing is ever returned to a slab.
// Errors (*SlabError): ErrSlabAbsent when capacity is 0, ErrInvalidCarve for
// n ≤ 0, align not a positive power of two or used outside [0, capacity],
// ErrSlabExhausted when offset + n passes capacity (or overflows int64).
func CarveSlab(capacity, used, n, align int64) (offset, newUsed int64, err error) {
	fail := func(sentinel error) (int64, int64, error) {
		return 0, 0, &SlabError{Asked: n, Align: align, Used: used, Capacity: capacity, Err: sentinel}
	}
	switch {
	case capacity == 0:
		return fail(ErrSlabAbsent)
	case n <= 0, align <= 0, align&(align-1) != 0, used < 0, used > capacity:
		return fail(ErrInvalidCarve)
	}
	offset, err = alignUp("slab carve offset", used, align)
	if err != nil {
		return fail(ErrSlabExhausted)
	}
	newUsed, err = CheckedAdd("slab carve end", offset, n)
	if err != nil || newUsed > capacity {
		return fail(ErrSlabExhausted)
	}
	return offset, newUsed, nil
}
