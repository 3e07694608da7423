package arena

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// h200DriverBytes is an H200's total memory as cuMemGetInfo reports it
// (docs/gpu-validation.md), not the 141 GiB of the data sheet.
const h200DriverBytes = 150_109_880_320

// refCap is ⌊u × total⌋ with u read as its shortest decimal, computed with
// big.Rat: the reference utilizationCap must agree with.
func refCap(u float64, total int64) int64 {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(u, 'g', -1, 64))
	if !ok {
		panic(u)
	}
	r.Mul(r, new(big.Rat).SetInt64(total))
	return new(big.Int).Quo(r.Num(), r.Denom()).Int64()
}

func TestBudget(t *testing.T) {
	tests := []struct {
		name          string
		util          float64
		total, others int64
		want          int64
	}{
		// float64: 0.29 × 100 = 28.999999999999996; Budget reads 0.29 as 29/100.
		{"0.29 of 100 is 29, not 28", 0.29, 100, 0, 29},
		{"0.7 of 10 is 7, though 0.7 is 0.69999… in binary", 0.7, 10, 0, 7},
		{"0.9 of 10", 0.9, 10, 0, 9},
		{"0.9 of an odd total", 0.9, 1_000_000_007, 0, 900_000_006}, // 900000006.3
		{"0.9 of an odd total less others", 0.9, 1_000_000_007, 999, 900_000_006 - 999},
		{"1 is the whole device", 1, 12_345, 0, 12_345},
		{"1 less all but a byte", 1, 12_345, 12_344, 1},
		{"1e-9 of an H200", 1e-9, h200DriverBytes, 0, 150},
		{"1e-9 of MaxInt64", 1e-9, math.MaxInt64, 0, 9_223_372_036},
		{"1 of MaxInt64", 1, math.MaxInt64, 0, math.MaxInt64},
		{"0.9 of MaxInt64", 0.9, math.MaxInt64, 0, 8_301_034_833_169_298_226}, // …226.3
		{"0.9999999999999999 of MaxInt64", 0.9999999999999999, math.MaxInt64, 0, 9_223_372_036_854_774_884},
		{"0.9 of MaxInt64 less MaxInt64/2", 0.9, math.MaxInt64, math.MaxInt64 / 2, 8_301_034_833_169_298_226 - math.MaxInt64/2},
		{"H200 at 0.9", 0.9, h200DriverBytes, 0, 135_098_892_288},
		{"H200 at 0.95", 0.95, h200DriverBytes, 0, 142_604_386_304},
		{"H200 at 0.9, 4 GiB held by others", 0.9, h200DriverBytes, 4 << 30, 135_098_892_288 - 4<<30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ref := refCap(tt.util, tt.total) - tt.others; ref != tt.want {
				t.Fatalf("the table says %d B, the big.Rat reference %d B", tt.want, ref)
			}
			got, err := Budget(tt.util, tt.total, tt.others)
			if err != nil || got != tt.want {
				t.Fatalf("Budget(%g, %d, %d) = %d, %v; want %d", tt.util, tt.total, tt.others, got, err, tt.want)
			}
		})
	}
}

// TestUtilizationCapMatchesReference: the 128-bit product and stepwise
// division agree with big.Rat for random utilizations (short decimals and
// arbitrary float64s) and totals (small, large, near MaxInt64).
func TestUtilizationCapMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20_000 {
		var u float64
		switch i % 3 {
		case 0: // a short decimal such as 0.9137
			u = float64(1+rng.IntN(10_000)) / 10_000
		case 1: // any float64 in (0, 1]
			u = 1 - rng.Float64()
		default: // tiny: down to 1e-300
			u = math.Pow(10, -300*rng.Float64())
		}
		var total int64
		switch i % 4 {
		case 0:
			total = 1 + rng.Int64N(1<<20)
		case 1:
			total = 1 + rng.Int64N(1<<48)
		case 2:
			total = math.MaxInt64 - rng.Int64N(1<<20)
		default:
			total = 1 + rng.Int64N(math.MaxInt64)
		}
		if got, want := utilizationCap(u, total), refCap(u, total); got != want {
			t.Fatalf("utilizationCap(%v, %d) = %d, want %d", u, total, got, want)
		}
	}
}

func TestBudgetErrors(t *testing.T) {
	tests := []struct {
		name          string
		util          float64
		total, others int64
		option        string   // the *OptionError's option; "" for a *BudgetError
		says          []string // in the message
	}{
		{"utilization 0", 0, 100, 0, "gpu_memory_utilization", []string{"= 0", "(0, 1]", "unset for the default 0.9"}},
		{"utilization < 0", -0.5, 100, 0, "gpu_memory_utilization", []string{"-0.5", "(0, 1]"}},
		{"utilization > 1", 1.01, 100, 0, "gpu_memory_utilization", []string{"1.01", "(0, 1]"}},
		{"utilization NaN", math.NaN(), 100, 0, "gpu_memory_utilization", []string{"NaN"}},
		{"utilization +Inf", math.Inf(1), 100, 0, "gpu_memory_utilization", []string{"+Inf"}},
		{"total 0", 0.9, 0, 0, "total_bytes", []string{"must be positive"}},
		{"total < 0", 0.9, -1, 0, "total_bytes", []string{"-1"}},
		{"others < 0", 0.9, 100, -1, "used_by_others_bytes", []string{"-1", "[0, total_bytes = 100]"}},
		{"others > total", 0.9, 100, 101, "used_by_others_bytes", []string{"101", "[0, total_bytes = 100]"}},
		{"others = total", 0.9, 100, 100, "", []string{"0.9 of 100 B is 90 B", "already hold 100 B", "free memory on the device"}},
		{"others = the cap", 0.9, 100, 90, "", []string{"already hold 90 B", "raise gpu_memory_utilization to at least 0.91"}},
		{"others = H200 at 0.95", 0.95, h200DriverBytes, 142_604_386_304, "", []string{"is 142604386304 B", "to at least 0.9501"}},
		{"a byte device at 0.9", 0.9, 1, 0, "", []string{"of 1 B is 0 B", "to at least 1,"}},
		{"a tiny fraction", 1e-9, 100, 0, "", []string{"1e-09 of 100 B is 0 B", "to at least 0.01"}},
		{"others = total = MaxInt64", 1, math.MaxInt64, math.MaxInt64, "", []string{"already hold 9223372036854775807 B", "free memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Budget(tt.util, tt.total, tt.others)
			if got != 0 || err == nil {
				t.Fatalf("Budget(%g, %d, %d) = %d, %v; want an error", tt.util, tt.total, tt.others, got, err)
			}
			if tt.option != "" {
				var oe *OptionError
				if !errors.As(err, &oe) || oe.Option != tt.option || !errors.Is(err, ErrInvalidOption) {
					t.Fatalf("err = %v, want an *OptionError for %s", err, tt.option)
				}
			} else {
				var be *BudgetError
				if !errors.As(err, &be) || !errors.Is(err, ErrNoBudget) || be.CapBytes != refCap(tt.util, tt.total) ||
					be.UsedByOthersBytes != tt.others || be.TotalBytes != tt.total || be.Utilization != tt.util {
					t.Fatalf("err = %#v, want a *BudgetError for cap %d B", err, refCap(tt.util, tt.total))
				}
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not say %q", err, s)
				}
			}
		})
	}
}

func TestValidateGPUMemoryUtilization(t *testing.T) {
	for _, u := range []float64{math.SmallestNonzeroFloat64, 1e-9, 0.5, 0.9, 1} {
		if err := ValidateGPUMemoryUtilization(u); err != nil {
			t.Errorf("ValidateGPUMemoryUtilization(%g) = %v, want nil", u, err)
		}
	}
	for _, u := range []float64{0, math.Copysign(0, -1), -1, 1.0000000000000002, math.NaN(), math.Inf(-1)} {
		if err := ValidateGPUMemoryUtilization(u); !isOption(err, "gpu_memory_utilization") {
			t.Errorf("ValidateGPUMemoryUtilization(%g) = %v, want an *OptionError", u, err)
		}
	}
}

func TestShortestDecimal(t *testing.T) {
	tests := []struct {
		u    float64
		m    uint64
		k    int
		name string
	}{
		{0.9, 9, 1, "0.9"},
		{1, 1, 0, "1"},
		{0.95, 95, 2, "0.95"},
		{1e-9, 1, 9, "1e-9"},
		{0.30000000000000004, 30000000000000004, 17, "float64 0.1+0.2"},
		{math.SmallestNonzeroFloat64, 5, 324, "5e-324"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, k := shortestDecimal(tt.u); m != tt.m || k != tt.k {
				t.Errorf("shortestDecimal(%v) = %d × 10^−%d, want %d × 10^−%d", tt.u, m, k, tt.m, tt.k)
			}
		})
	}
}
