package arena

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// ErrNoBudget is wrapped by the *BudgetError of a device on which other
// processes already hold all of gpu_memory_utilization × total: nothing is
// left for this process. Test with errors.Is.
var ErrNoBudget = errors.New("arena: no memory budget left")

// BudgetError says why Budget found nothing left for this process: other
// processes already hold at least CapBytes. It unwraps to ErrNoBudget.
type BudgetError struct {
	// Utilization is the gpu_memory_utilization asked for, in (0, 1].
	Utilization float64
	// TotalBytes is the device's total memory, in bytes.
	TotalBytes int64
	// CapBytes is ⌊Utilization × TotalBytes⌋, in bytes: what every process
	// on the device may hold together under this utilization.
	CapBytes int64
	// UsedByOthersBytes is the memory other processes hold, in bytes.
	UsedByOthersBytes int64
}

// Error says what was asked (the utilization and the bytes it allows), what
// the device has (others' bytes), and what to change: the lowest utilization
// that leaves a byte, when one ≤ 1 exists, or freeing memory.
func (e *BudgetError) Error() string {
	s := fmt.Sprintf("arena: gpu_memory_utilization %g of %d B is %d B, but other processes already hold %d B: nothing is left for this process; ",
		e.Utilization, e.TotalBytes, e.CapBytes, e.UsedByOthersBytes)
	if e.UsedByOthersBytes < e.TotalBytes {
		if u := lowestUtilization(e.UsedByOthersBytes+1, e.TotalBytes); u > 0 {
			return s + fmt.Sprintf("raise gpu_memory_utilization to at least %g, or free memory on the device", u)
		}
	}
	return s + "free memory on the device"
}

// Unwrap returns ErrNoBudget.
func (e *BudgetError) Unwrap() error { return ErrNoBudget }

// ValidateGPUMemoryUtilization returns nil for a gpu_memory_utilization in
// (0, 1], and otherwise an *OptionError (errors.Is ErrInvalidOption) for
// option "gpu_memory_utilization" that says so. 0 is invalid: leave the
// option unset for DefaultGPUMemoryUtilization.
func ValidateGPUMemoryUtilization(f float64) error {
	if f > 0 && f <= 1 { // false for NaN
		return nil
	}
	return &OptionError{Option: "gpu_memory_utilization", Value: f,
		Reason: fmt.Sprintf("must be in (0, 1]; leave it unset for the default %g", DefaultGPUMemoryUtilization)}
}

// Budget is the most bytes this process may hold on a device of totalBytes
// of which other processes hold usedByOthersBytes, under the fraction
// utilization of the device's total memory (design.md §6):
//
//	budget = ⌊utilization × totalBytes⌋ − usedByOthersBytes
//
// The product is exact: utilization is read as its shortest decimal (0.9 is
// 9/10, not the binary 0.9000000000000000222…, as strconv.FormatFloat(u,
// 'e', -1, 64) writes it) and multiplied in 128-bit integers, so the result
// is exact and cannot overflow for any int64 total. Fit and the GPU actor
// (gpuworker.Worker.Budget) both use it, so the preflight fit and the
// running worker agree to the byte.
//
// Errors: an *OptionError (errors.Is ErrInvalidOption) for a utilization
// outside (0, 1] ("gpu_memory_utilization"), a totalBytes ≤ 0
// ("total_bytes"), a usedByOthersBytes below 0 or above totalBytes
// ("used_by_others_bytes"); a *BudgetError (errors.Is ErrNoBudget) when the
// budget is ≤ 0, that is when other processes already hold all of
// ⌊utilization × totalBytes⌋.
func Budget(utilization float64, totalBytes, usedByOthersBytes int64) (int64, error) {
	if err := ValidateGPUMemoryUtilization(utilization); err != nil {
		return 0, err
	}
	switch {
	case totalBytes <= 0:
		return 0, &OptionError{Option: "total_bytes", Value: totalBytes, Reason: "must be positive"}
	case usedByOthersBytes < 0 || usedByOthersBytes > totalBytes:
		return 0, &OptionError{Option: "used_by_others_bytes", Value: usedByOthersBytes,
			Reason: fmt.Sprintf("must be in [0, total_bytes = %d]", totalBytes)}
	}
	capBytes := utilizationCap(utilization, totalBytes)
	// Both terms are in [0, totalBytes]: the difference cannot overflow.
	if b := capBytes - usedByOthersBytes; b > 0 {
		return b, nil
	}
	return 0, &BudgetError{Utilization: utilization, TotalBytes: totalBytes, CapBytes: capBytes, UsedByOthersBytes: usedByOthersBytes}
}

// pow10 holds 10^0 … 10^19, every power of ten a uint64 holds.
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// utilizationCap is ⌊u × total⌋ for u in (0, 1] and total ≥ 0, u read as
// its shortest decimal m × 10^−k (see shortestDecimal). It is exact: m <
// 10^17 < 2^57 and total < 2^63, so m × total < 2^120 fits in 128 bits, and
// the division by 10^k goes in steps of at most 10^19 because ⌊⌊x/a⌋/b⌋ =
// ⌊x/(a·b)⌋. bits.Div64 needs the high word below the divisor: in the first
// step the quotient is at most u × total ≤ total < 2^63 (k < 19) or below
// 10^17 × 2^63 / 10^19 < 2^64 (k ≥ 19), and after it the high word is 0.
// The result is at most total, since u ≤ 1.
func utilizationCap(u float64, total int64) int64 {
	m, k := shortestDecimal(u)
	hi, lo := bits.Mul64(m, uint64(total))
	for k > 0 && hi|lo != 0 {
		step := min(k, 19)
		q, _ := bits.Div64(hi, lo, pow10[step])
		hi, lo, k = 0, q, k-step
	}
	return int64(lo)
}

// shortestDecimal is u in (0, 1] as m × 10^−k with m the digits of u's
// shortest decimal form (strconv.FormatFloat(u, 'e', -1, 64), at most 17
// digits) and k ≥ 0: 0.9 is 9 × 10^−1, 1 is 1 × 10^0, 1e-9 is 1 × 10^−9.
func shortestDecimal(u float64) (m uint64, k int) {
	s := strconv.FormatFloat(u, 'e', -1, 64) // "9e-01", "1.5e-09", "1e+00"
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	m, err1 := strconv.ParseUint(digits, 10, 64)
	e, err2 := strconv.Atoi(exp)
	if err1 != nil || err2 != nil || math.IsNaN(u) || u <= 0 || u > 1 {
		panic(fmt.Sprintf("arena: shortestDecimal(%v): not a utilization in (0, 1]", u)) // callers validate first
	}
	// u = d.ddd × 10^e = digits × 10^(e − (len(digits) − 1)); e ≤ 0 since u ≤ 1.
	return m, len(digits) - 1 - e
}
