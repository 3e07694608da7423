package arena

import (
	"errors"
	"fmt"
	"math"
)

// ErrOverflow is the sentinel every size overflow wraps: a shape or byte count
// that does not fit in int64. Test with errors.Is; the detail is an *OverflowError.
var ErrOverflow = errors.New("arena: size overflows int64")

// OverflowError says which size overflowed and on which operation.
// It unwraps to ErrOverflow.
type OverflowError struct {
	// What names the size being computed ("qkv_output", "kv bytes per block").
	What string
	// Op is "×" or "+"; A and B are the operands that overflowed.
	Op   string
	A, B int64
}

// Error is "arena: WHAT: A OP B overflows int64".
func (e *OverflowError) Error() string {
	return fmt.Sprintf("arena: %s: %d %s %d overflows int64", e.What, e.A, e.Op, e.B)
}

// Unwrap returns ErrOverflow.
func (e *OverflowError) Unwrap() error { return ErrOverflow }

// CheckedMul returns a·b, or an *OverflowError naming what when the product
// does not fit in int64.
func CheckedMul(what string, a, b int64) (int64, error) {
	if a == 0 || b == 0 {
		return 0, nil
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, &OverflowError{What: what, Op: "×", A: a, B: b}
	}
	return c, nil
}

// CheckedAdd returns a+b, or an *OverflowError naming what when the sum does
// not fit in int64.
func CheckedAdd(what string, a, b int64) (int64, error) {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		return 0, &OverflowError{What: what, Op: "+", A: a, B: b}
	}
	return c, nil
}

// CheckedProduct returns the product of factors (1 for none), or an
// *OverflowError naming what, the partial product and the factor that overflowed.
func CheckedProduct(what string, factors ...int64) (int64, error) {
	p := int64(1)
	for _, f := range factors {
		var err error
		if p, err = CheckedMul(what, p, f); err != nil {
			return 0, err
		}
	}
	return p, nil
}

// CheckedSum returns the sum of terms (0 for none), or an *OverflowError
// naming what, the partial sum and the term that overflowed.
func CheckedSum(what string, terms ...int64) (int64, error) {
	s := int64(0)
	for _, t := range terms {
		var err error
		if s, err = CheckedAdd(what, s, t); err != nil {
			return 0, err
		}
	}
	return s, nil
}

// sizer is an overflow-checked accumulator of sizes (elements or bytes,
// int64): mul and add compute with CheckedProduct and CheckedSum, keep the
// first *OverflowError in err, naming what, and return 0 once err is set,
// so a chain of arithmetic is checked once, at its end. The planner, the KV
// layout and the weight estimate embed one; the zero value is ready to use.
type sizer struct {
	// what names the size being computed in an *OverflowError ("logits",
	// "kv cache"); set it before the arithmetic it names.
	what string
	// err is the first error, nil while there is none. Only mul and add
	// set it, except in the weight estimate, which also keeps there a
	// tensor's first failure.
	err error
}

// mul is the product of xs (1 for none), or 0 once err is set.
func (s *sizer) mul(xs ...int64) int64 {
	if s.err != nil {
		return 0
	}
	v, err := CheckedProduct(s.what, xs...)
	s.err = err
	return v
}

// add is the sum of xs (0 for none), or 0 once err is set.
func (s *sizer) add(xs ...int64) int64 {
	if s.err != nil {
		return 0
	}
	v, err := CheckedSum(s.what, xs...)
	s.err = err
	return v
}

// ceilDiv is ⌈a/b⌉ for a ≥ 0, b > 0, computed without the a+b−1 overflow.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// alignUp rounds x ≥ 0 up to a multiple of align > 0, overflow-checked.
func alignUp(what string, x, align int64) (int64, error) {
	return CheckedMul(what, ceilDiv(x, align), align)
}
