package arena

import (
	"errors"
	"fmt"
)

// ErrInvalidPlan is the sentinel every Plan.Validate error wraps: a Plan
// whose contents disagree with what its fields' doc comments promise (a
// hand-made or hand-edited plan; PlanFor's plans are valid). Test with
// errors.Is; the detail (field, value, what is wrong) is a *PlanError.
var ErrInvalidPlan = errors.New("arena: invalid plan")

// PlanError is one field of a Plan that breaks the plan's invariants (see
// Plan.Validate). It unwraps to ErrInvalidPlan and, when set, to Err.
type PlanError struct {
	// Field is the plan field, snake_case, a buffer by its BufferID name and
	// a slab by its name: "plan" (a nil plan), "buffers" (no buffer is
	// present), "buffers[logits].bytes", "buffers[logits].shape",
	// "buffers[3].id", `slabs["w"].bytes`, "slabs[2].name", "buffer_bytes",
	// "slab_bytes", "total_bytes".
	Field string
	// Value is the offending value: an int64 for a byte count, a []int64 for
	// a shape, a string for a name, a BufferID's name or an absent reason;
	// nil when the plan as a whole is at fault.
	Value any
	// Reason says what is wrong and what to change ("must be ≥ 0").
	Reason string
	// Err is the underlying cause (an *OverflowError), or nil.
	Err error
}

// Error is "arena: invalid plan: FIELD = VALUE: reason" (no value when nil),
// followed by ": " and Err when set.
func (e *PlanError) Error() string {
	s := "arena: invalid plan: " + e.Field
	if e.Value != nil {
		s += fmt.Sprintf(" = %v", e.Value)
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrInvalidPlan and, when set, the underlying cause.
func (e *PlanError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidPlan, e.Err}
	}
	return []error{ErrInvalidPlan}
}

// Validate checks that the plan is one a device can be asked for: what its
// fields' doc comments promise, the invariants every PlanFor plan keeps. It is
// pure (no device, no allocation beyond the slab-name set) and checks, in
// this order:
//
//  1. at least one buffer is present (Bytes > 0): an arena of slabs only is
//     no arena;
//  2. every Buffers[i] has ID i, Bytes ≥ 0, and is either present (Bytes > 0,
//     Absent empty) or absent (Bytes 0, Absent saying why, Shape nil);
//  3. every slab has a name, no name twice, and Bytes > 0;
//  4. BufferBytes is the sum of the buffers' bytes, SlabBytes of the slabs',
//     TotalBytes of both, each sum overflow-checked;
//  5. every present buffer has a known DType and a Shape of dimensions > 0
//     whose product times the DType's size, overflow-checked, is its Bytes.
//
// It returns nil for a valid plan, and otherwise the first violation found
// as a *PlanError (errors.Is ErrInvalidPlan); a sum or product that does not
// fit in int64 is a *PlanError whose Err is an *OverflowError, so the error
// also matches ErrOverflow. A nil plan is a *PlanError too.
func (p *Plan) Validate() error {
	if p == nil {
		return &PlanError{Field: "plan", Reason: "nil plan; make it with arena.PlanFor"}
	}
	if err := p.validateBuffers(); err != nil {
		return err
	}
	if err := p.validateSlabs(); err != nil {
		return err
	}
	if err := p.validateTotals(); err != nil {
		return err
	}
	return p.validateShapes()
}

// validateBuffers is Validate's steps 1 and 2.
func (p *Plan) validateBuffers() error {
	present := false
	for _, b := range p.Buffers {
		present = present || b.Bytes > 0
	}
	if !present {
		return &PlanError{Field: "buffers", Reason: fmt.Sprintf(
			"the plan has no buffers (none of its %d buffers has bytes > 0, total_bytes %d); make it with arena.PlanFor", NumBuffers, p.TotalBytes)}
	}
	for i, b := range p.Buffers {
		id := BufferID(i)
		field := "buffers[" + id.String() + "]"
		switch {
		case b.ID != id:
			return &PlanError{Field: fmt.Sprintf("buffers[%d].id", i), Value: b.ID.String(),
				Reason: fmt.Sprintf("want %s: Buffers is indexed by BufferID", id)}
		case b.Bytes < 0:
			return &PlanError{Field: field + ".bytes", Value: b.Bytes,
				Reason: "must be ≥ 0 (0 for an absent buffer, with absent saying why)"}
		case b.Bytes > 0 && b.Absent != "":
			return &PlanError{Field: field + ".absent", Value: b.Absent,
				Reason: fmt.Sprintf("the buffer has %d B: a present buffer has no absent reason, an absent one 0 B; clear absent or set bytes to 0", b.Bytes)}
		case b.Bytes == 0 && b.Absent == "":
			return &PlanError{Field: field + ".absent", Value: "",
				Reason: "the buffer has 0 B, so it is absent and must say why; set absent, or give it bytes and a shape"}
		case b.Bytes == 0 && b.Shape != nil:
			return &PlanError{Field: field + ".shape", Value: b.Shape,
				Reason: "the buffer is absent (0 B): its shape must be nil"}
		}
	}
	return nil
}

// validateSlabs is Validate's step 3: the slab supervisor tells slabs apart by
// name and allocates each one.
func (p *Plan) validateSlabs() error {
	seen := make(map[string]bool, len(p.Slabs))
	for i, sl := range p.Slabs {
		field := fmt.Sprintf("slabs[%q]", sl.Name)
		switch {
		case sl.Name == "":
			return &PlanError{Field: fmt.Sprintf("slabs[%d].name", i), Value: "",
				Reason: fmt.Sprintf("slab %d of %d has an empty name; every slab needs a distinct name", i+1, len(p.Slabs))}
		case seen[sl.Name]:
			return &PlanError{Field: field + ".name", Value: sl.Name,
				Reason: fmt.Sprintf("the plan names slab %q twice (slab %d of %d); give each slab a distinct name", sl.Name, i+1, len(p.Slabs))}
		case sl.Bytes <= 0:
			return &PlanError{Field: field + ".bytes", Value: sl.Bytes,
				Reason: "size must be > 0; leave an unused slab out of the plan"}
		}
		seen[sl.Name] = true
	}
	return nil
}

// validateTotals is Validate's step 4.
func (p *Plan) validateTotals() error {
	var buffers int64
	for i, b := range p.Buffers {
		var err error
		if buffers, err = CheckedAdd("buffer_bytes", buffers, b.Bytes); err != nil {
			return &PlanError{Field: "buffer_bytes", Value: p.BufferBytes,
				Reason: "the buffers' bytes do not add up in int64", Err: naming(err, BufferID(i))}
		}
	}
	if p.BufferBytes != buffers {
		return &PlanError{Field: "buffer_bytes", Value: p.BufferBytes,
			Reason: fmt.Sprintf("the buffers add up to %d B; set buffer_bytes to their sum", buffers)}
	}
	var slabs int64
	for _, sl := range p.Slabs {
		var err error
		if slabs, err = CheckedAdd("slab_bytes", slabs, sl.Bytes); err != nil {
			var o *OverflowError
			if errors.As(err, &o) {
				o.What += fmt.Sprintf(" at slab %q", sl.Name)
			}
			return &PlanError{Field: "slab_bytes", Value: p.SlabBytes,
				Reason: "the slabs' bytes do not add up in int64", Err: err}
		}
	}
	if p.SlabBytes != slabs {
		return &PlanError{Field: "slab_bytes", Value: p.SlabBytes,
			Reason: fmt.Sprintf("the slabs add up to %d B; set slab_bytes to their sum", slabs)}
	}
	total, err := CheckedAdd("total_bytes", buffers, slabs)
	if err != nil {
		return &PlanError{Field: "total_bytes", Value: p.TotalBytes,
			Reason: "buffer_bytes + slab_bytes does not fit in int64", Err: err}
	}
	if p.TotalBytes != total {
		return &PlanError{Field: "total_bytes", Value: p.TotalBytes,
			Reason: fmt.Sprintf("buffer_bytes %d + slab_bytes %d = %d B; set total_bytes to that", buffers, slabs, total)}
	}
	return nil
}

// validateShapes is Validate's step 5.
func (p *Plan) validateShapes() error {
	for i, b := range p.Buffers {
		if b.Bytes == 0 {
			continue
		}
		id := BufferID(i)
		field := "buffers[" + id.String() + "].bytes"
		size := b.DType.Size()
		if size == 0 || len(b.Shape) == 0 {
			return &PlanError{Field: field, Value: b.Bytes,
				Reason: fmt.Sprintf("a present buffer needs a known dtype and a shape (dtype %v, shape %v)", b.DType, b.Shape)}
		}
		n := size
		for _, d := range b.Shape {
			if d <= 0 {
				return &PlanError{Field: "buffers[" + id.String() + "].shape", Value: b.Shape,
					Reason: "every dimension of a present buffer must be > 0"}
			}
			var err error
			if n, err = CheckedMul(id.String()+" shape", n, d); err != nil {
				return &PlanError{Field: field, Value: b.Bytes,
					Reason: fmt.Sprintf("shape %v × %d B (%v) does not fit in int64", b.Shape, size, b.DType), Err: err}
			}
		}
		if n != b.Bytes {
			return &PlanError{Field: field, Value: b.Bytes,
				Reason: fmt.Sprintf("shape %v × %d B (%v) = %d B; bytes must be the shape's product", b.Shape, size, b.DType, n)}
		}
	}
	return nil
}
