package main

import (
	"fmt"
	"math/big"
	"strings"
	"unicode"
)

// byteSize is a pflag.Value holding a byte count, given as a number and a
// unit: "80GB", "80GiB", "1.5 TiB", "85899345920B". Binary units (KiB,
// MiB, GiB, TiB, PiB) are powers of 1024, decimal ones (KB, MB, GB, TB,
// PB) of 1000; "B" is bytes; units are case-insensitive. A bare number is
// refused (is "80" 80 B, 80 GB or 80 GiB?) except 0, and so is a size
// that is not a whole number of bytes ("1.5B", "0.1KiB").
type byteSize int64

var byteUnits = map[string]int64{
	"b":  1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}

// parseByteSize parses s as described on byteSize. It refuses a bare
// number other than 0, negative values, unknown units, fractions of a byte
// and values past int64; each message says what to write instead.
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return unicode.IsLetter(r) })
	num, unit := t, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(t[:i]), strings.ToLower(t[i:])
	}
	if strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("size %q: must not be negative", s)
	}
	if !isDecimal(num) {
		return 0, fmt.Errorf("size %q: not a size like 80GB, 80GiB or 85899345920B", s)
	}
	r, _ := new(big.Rat).SetString(num)
	if unit == "" {
		if r.Sign() == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("size %q: give a unit: %sGB (×10^9 B), %sGiB (×2^30 B) or %sB (bytes)", s, num, num, num)
	}
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)", s, t[i:])
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("size %q: %s B is not a whole number of bytes", s, r.FloatString(3))
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return r.Num().Int64(), nil
}

// isDecimal reports whether s is digits with at most one decimal point.
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// formatByteSize writes n in the largest binary unit that divides it exactly
// ("141GiB"), else in bytes ("150109880320B"); parseByteSize reads it back.
func formatByteSize(n int64) string {
	for _, u := range []struct {
		name string
		v    int64
	}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.v == 0 {
			return fmt.Sprintf("%d%s", n/u.v, u.name)
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%dB", n)
}

// String implements pflag.Value.
func (b *byteSize) String() string { return formatByteSize(int64(*b)) }

// Set implements pflag.Value.
func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// Type implements pflag.Value.
func (b *byteSize) Type() string { return "size" }
