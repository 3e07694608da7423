package arena

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// refCeil is ⌈u × total⌉ with u read as its shortest decimal, by big.Rat.
func refCeil(u float64, total int64) int64 {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(u, 'g', -1, 64))
	if !ok {
		panic(u)
	}
	r.Mul(r, new(big.Rat).SetInt64(total))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

// TestUtilizationCeilMatchesReference: ⌈u × total⌉ is exact for random
// utilizations and totals up to MaxInt64.
func TestUtilizationCeilMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20_000 {
		u := float64(1+rng.IntN(10_000)) / 10_000
		if i%2 == 1 {
			u = 1 - rng.Float64()
		}
		total := 1 + rng.Int64N(math.MaxInt64)
		if i%3 == 0 {
			total = 1 + rng.Int64N(1<<40)
		}
		if got, want := utilizationCeil(u, total), refCeil(u, total); got != want {
			t.Fatalf("utilizationCeil(%v, %d) = %d, want %d", u, total, got, want)
		}
	}
	// 0.9 × 100000000007 = 90000000006.3: the floor is 90000000006, the ceiling 90000000007.
	if c, f := utilizationCeil(0.9, 100_000_000_007), utilizationCap(0.9, 100_000_000_007); c != 90_000_000_007 || f != 90_000_000_006 {
		t.Errorf("ceil %d, floor %d", c, f)
	}
	if c := utilizationCeil(0.5, 10); c != 5 {
		t.Errorf("exact product: ceil %d, want 5", c)
	}
}

// TestInstanceBudget: vLLM's rule, ⌈u × total⌉ for this process provided
// that much is free, else a *FreeMemoryError saying what to lower.
func TestInstanceBudget(t *testing.T) {
	h200 := int64(H200TotalBytes)
	if b, err := InstanceBudget(0.9, h200, h200); err != nil || b != 135_098_892_288 { // 0.9 × 150109880320 is exact
		t.Errorf("whole H200 free: %d, %v", b, err)
	}
	// Others hold 20 GB: the budget is the same, others do not count.
	if b, err := InstanceBudget(0.8, h200, h200-20_000_000_000); err != nil || b != 120_087_904_256 {
		t.Errorf("20 GB held by others: %d, %v", b, err)
	}
	_, err := InstanceBudget(0.9, h200, 130_000_000_000)
	var fe *FreeMemoryError
	if !errors.As(err, &fe) || !errors.Is(err, ErrNoBudget) || fe.RequestedBytes != 135_098_892_288 || fe.FreeBytes != 130_000_000_000 ||
		!strings.Contains(err.Error(), "lower gpu_memory_utilization to at most 0.866") {
		t.Errorf("not enough free: %v", err)
	}
	if _, err := InstanceBudget(0.9, 100, 0); !strings.Contains(fmt.Sprint(err), "free memory on the device") {
		t.Errorf("nothing free: %v", err)
	}
	for _, tt := range []struct {
		u           float64
		total, free int64
		option      string
	}{
		{0, 100, 100, "gpu_memory_utilization"},
		{0.9, 0, 0, "total_bytes"},
		{0.9, 100, 101, "free_bytes"},
		{0.9, 100, -1, "free_bytes"},
	} {
		if _, err := InstanceBudget(tt.u, tt.total, tt.free); !isOption(err, tt.option) {
			t.Errorf("InstanceBudget(%v, %d, %d) = %v, want an *OptionError for %s", tt.u, tt.total, tt.free, err, tt.option)
		}
	}
	if s, err := ParseUtilizationScope(""); err != nil || s != UtilizationDevice {
		t.Errorf("empty scope: %q, %v", s, err)
	}
	if _, err := ParseUtilizationScope("cluster"); !isOption(err, "utilization_scope") {
		t.Errorf("unknown scope: %v", err)
	}
}
