package arena

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestCheckedArithmetic(t *testing.T) {
	tests := []struct {
		name     string
		f        func() (int64, error)
		want     int64
		overflow bool
	}{
		{"mul", func() (int64, error) { return CheckedMul("x", 8192, 151936) }, 1244659712, false},
		{"mul zero", func() (int64, error) { return CheckedMul("x", 0, math.MaxInt64) }, 0, false},
		{"mul max", func() (int64, error) { return CheckedMul("x", math.MaxInt64, 1) }, math.MaxInt64, false},
		{"mul overflow", func() (int64, error) { return CheckedMul("x", 1<<32, 1<<31) }, 0, true},
		{"mul neg overflow", func() (int64, error) { return CheckedMul("x", -1, math.MinInt64) }, 0, true},
		{"add", func() (int64, error) { return CheckedAdd("x", 1, 2) }, 3, false},
		{"add overflow", func() (int64, error) { return CheckedAdd("x", math.MaxInt64, 1) }, 0, true},
		{"add neg overflow", func() (int64, error) { return CheckedAdd("x", math.MinInt64, -1) }, 0, true},
		{"product", func() (int64, error) { return CheckedProduct("x", 8192, 4096, 2) }, 67108864, false},
		{"product empty", func() (int64, error) { return CheckedProduct("x") }, 1, false},
		{"product overflow", func() (int64, error) { return CheckedProduct("x", 1<<40, 1<<20, 1<<4) }, 0, true},
		{"sum", func() (int64, error) { return CheckedSum("x", 1, 2, 3) }, 6, false},
		{"sum overflow", func() (int64, error) { return CheckedSum("x", math.MaxInt64-1, 1, 1) }, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.f()
			if tt.overflow {
				var oe *OverflowError
				if !errors.Is(err, ErrOverflow) || !errors.As(err, &oe) || oe.What != "x" {
					t.Fatalf("err = %v, want *OverflowError naming x", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestOverflowErrorNamesOperands(t *testing.T) {
	_, err := CheckedProduct("logits", 1<<40, 1<<20, 1<<4)
	want := "arena: logits: 1152921504606846976 × 16 overflows int64"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestCeilDivAndAlignUp(t *testing.T) {
	if got := ceilDiv(32768, 16); got != 2048 {
		t.Errorf("ceilDiv(32768, 16) = %d, want 2048", got)
	}
	if got := ceilDiv(8193, 64); got != 129 {
		t.Errorf("ceilDiv(8193, 64) = %d, want 129", got)
	}
	if got := ceilDiv(math.MaxInt64, 2); got != 1<<62 {
		t.Errorf("ceilDiv(MaxInt64, 2) = %d, want 2^62", got)
	}
	if got, err := alignUp("x", 1025, 256); got != 1280 || err != nil {
		t.Errorf("alignUp(1025, 256) = %d, %v; want 1280", got, err)
	}
	if _, err := alignUp("x", math.MaxInt64, 256); !errors.Is(err, ErrOverflow) {
		t.Errorf("alignUp(MaxInt64, 256) err = %v, want ErrOverflow", err)
	}
}

// TestSizer: mul and add compute like CheckedProduct and CheckedSum; the
// first overflow is kept, names what and its operands, and every later
// call returns 0 without replacing it.
func TestSizer(t *testing.T) {
	tests := []struct {
		name    string
		steps   func(s *sizer) []int64
		want    []int64
		wantErr string // "" for none
	}{
		{"mul and add", func(s *sizer) []int64 {
			return []int64{s.mul(8192, 151936, 2), s.add(1, 2, 3), s.mul(), s.add()}
		}, []int64{2489319424, 6, 1, 0}, ""},
		{"nested", func(s *sizer) []int64 {
			return []int64{s.mul(s.add(64, s.mul(2, 8)), 64)} // (Hq + 2·Hkv)·D of gpt-oss
		}, []int64{5120}, ""},
		{"mul overflow is sticky", func(s *sizer) []int64 {
			return []int64{s.mul(2, 3), s.mul(1<<40, 1<<20, 1<<4), s.add(1, 1), s.mul(2, 2)}
		}, []int64{6, 0, 0, 0}, "arena: logits: 1152921504606846976 × 16 overflows int64"},
		{"add overflow keeps the first", func(s *sizer) []int64 {
			return []int64{s.add(math.MaxInt64, 1), s.mul(1<<40, 1<<40)}
		}, []int64{0, 0}, "arena: logits: 9223372036854775807 + 1 overflows int64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sizer{what: "logits"}
			got := tt.steps(s)
			if !slices.Equal(got, tt.want) {
				t.Errorf("values %v, want %v", got, tt.want)
			}
			switch {
			case tt.wantErr == "" && s.err != nil:
				t.Errorf("err = %v, want none", s.err)
			case tt.wantErr != "" && (s.err == nil || s.err.Error() != tt.wantErr || !errors.Is(s.err, ErrOverflow)):
				t.Errorf("err = %v, want %q wrapping ErrOverflow", s.err, tt.wantErr)
			}
		})
	}
}
