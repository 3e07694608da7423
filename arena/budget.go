package arena

import (
	"errors"
	"fmt"
	"math"
	"math/big"
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

// UtilizationScope is what gpu_memory_utilization caps, which decides how
// memory held by other processes counts against this process's budget.
type UtilizationScope string

// The utilization scopes; "" is UtilizationDevice.
const (
	// UtilizationDevice: gpu_memory_utilization × total caps what every
	// process on the device holds together, so memory others hold comes
	// out of this process's budget (Budget; design.md §6; vLLM's rule
	// before its V1 engine). The GPU worker's budget is always this one.
	UtilizationDevice UtilizationScope = "device"
	// UtilizationInstance: gpu_memory_utilization × total is this
	// process's own budget, whatever others hold, and the process refuses
	// to start unless that much is free (InstanceBudget). This is vLLM
	// V1's rule: request_memory (vllm/v1/worker/utils.py) takes
	// ⌈total × utilization⌉ from the start-up MemorySnapshot
	// (vllm/utils/mem_utils.py) and raises when its free memory is less;
	// Worker.determine_available_memory (vllm/v1/worker/gpu_worker.py)
	// gives the KV cache requested_memory − non_kv_cache_memory, so
	// memory others hold never comes out of it.
	UtilizationInstance UtilizationScope = "instance"
)

// ParseUtilizationScope reads a utilization scope: "" and "device" are
// UtilizationDevice, "instance" UtilizationInstance. Errors: an
// *OptionError for "utilization_scope".
func ParseUtilizationScope(s string) (UtilizationScope, error) {
	switch UtilizationScope(s) {
	case "", UtilizationDevice:
		return UtilizationDevice, nil
	case UtilizationInstance:
		return UtilizationInstance, nil
	}
	return "", &OptionError{Option: "utilization_scope", Value: clip(s), Reason: `want "device" or "instance" (vLLM's rule)`}
}

// InstanceBudget is the most bytes this process may hold under
// UtilizationInstance, vLLM's rule (vllm/v1/worker/utils.py
// request_memory): ⌈utilization × totalBytes⌉ (exact, the utilization read
// as its shortest decimal, as Budget reads it), provided freeBytes, what
// the device has free before the process allocates, is at least that.
// Errors: an *OptionError for a utilization outside (0, 1], a totalBytes ≤
// 0 ("total_bytes") or a freeBytes outside [0, totalBytes]
// ("free_bytes"); a *FreeMemoryError (errors.Is ErrNoBudget) when
// freeBytes is less than the budget: vLLM refuses to start.
func InstanceBudget(utilization float64, totalBytes, freeBytes int64) (int64, error) {
	if err := ValidateGPUMemoryUtilization(utilization); err != nil {
		return 0, err
	}
	switch {
	case totalBytes <= 0:
		return 0, &OptionError{Option: "total_bytes", Value: totalBytes, Reason: "must be positive"}
	case freeBytes < 0 || freeBytes > totalBytes:
		return 0, &OptionError{Option: "free_bytes", Value: freeBytes,
			Reason: fmt.Sprintf("must be in [0, total_bytes = %d]", totalBytes)}
	}
	requested := utilizationCeil(utilization, totalBytes)
	if freeBytes < requested {
		return 0, &FreeMemoryError{Utilization: utilization, TotalBytes: totalBytes, RequestedBytes: requested, FreeBytes: freeBytes}
	}
	return requested, nil
}

// FreeMemoryError is a device whose free memory is less than the budget
// UtilizationInstance asks for: vLLM's "Free memory on device … on startup
// is less than desired GPU memory utilization". It unwraps to ErrNoBudget.
type FreeMemoryError struct {
	// Utilization is the gpu_memory_utilization asked for, in (0, 1].
	Utilization float64
	// TotalBytes is the device's total memory; RequestedBytes is
	// ⌈Utilization × TotalBytes⌉; FreeBytes is what the device has free.
	TotalBytes, RequestedBytes, FreeBytes int64
}

// Error says what was asked, what is free, and what to change.
func (e *FreeMemoryError) Error() string {
	s := fmt.Sprintf("arena: gpu_memory_utilization %g of %d B asks for %d B but only %d B are free (utilization_scope instance, vLLM's rule): ",
		e.Utilization, e.TotalBytes, e.RequestedBytes, e.FreeBytes)
	if u := highestInstanceUtilization(e.FreeBytes, e.TotalBytes); u > 0 {
		return s + fmt.Sprintf("lower gpu_memory_utilization to at most %g, or free memory on the device", u)
	}
	return s + "free memory on the device"
}

// Unwrap returns ErrNoBudget.
func (e *FreeMemoryError) Unwrap() error { return ErrNoBudget }

// utilizationCeil is ⌈u × total⌉ for u in (0, 1] and total ≥ 0, exact as
// utilizationCap is: the floor, plus one when any step of the division by
// 10^k leaves a remainder (x is divisible by a·b exactly when x mod a = 0
// and (x/a) mod b = 0).
func utilizationCeil(u float64, total int64) int64 {
	m, k := shortestDecimal(u)
	hi, lo := bits.Mul64(m, uint64(total))
	exact := true
	for k > 0 && hi|lo != 0 {
		step := min(k, 19)
		q, r := bits.Div64(hi, lo, pow10[step])
		exact = exact && r == 0
		hi, lo, k = 0, q, k-step
	}
	if !exact {
		lo++
	}
	return int64(lo)
}

// highestInstanceUtilization is the highest n/10000 with ⌈n/10000 ×
// total⌉ ≤ free (the largest budget that free memory passes), 0 when
// even 1/10000 asks for more than free.
func highestInstanceUtilization(free, total int64) float64 {
	// ⌈n·total/10^4⌉ ≤ free ⟺ n·total ≤ free·10^4 ⟺ n ≤ ⌊free·10^4 / total⌋.
	n := new(big.Int).Mul(big.NewInt(free), big.NewInt(fitUtilizationStep))
	n.Quo(n, big.NewInt(total))
	if n.Sign() <= 0 {
		return 0
	}
	return float64(min(n.Int64(), fitUtilizationStep)) / fitUtilizationStep
}

// lowestInstanceUtilization is the lowest n/10000 ≤ 1 whose instance
// budget ⌈n/10000 × total⌉ is at least required and at most free; 0 when
// none is.
func lowestInstanceUtilization(required, free, total int64) float64 {
	// ⌈n·total/10^4⌉ ≥ required ⟺ n·total > (required − 1)·10^4.
	n := new(big.Int).Mul(big.NewInt(max(required-1, 0)), big.NewInt(fitUtilizationStep))
	n.Quo(n, big.NewInt(total))
	n.Add(n, big.NewInt(1))
	if n.Cmp(big.NewInt(fitUtilizationStep)) > 0 {
		return 0
	}
	u := float64(n.Int64()) / fitUtilizationStep
	if utilizationCeil(u, total) > free {
		return 0
	}
	return u
}
