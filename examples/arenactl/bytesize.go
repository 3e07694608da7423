package main

import (
	"fmt"
	"math/big"
	"strings"
	"unicode"
)

// byteSize is a pflag.Value holding a byte count, given as plain bytes
// ("151397597184") or as a number and a unit ("141GiB", "80GB", "1.5 TiB").
// Binary units (KiB, MiB, GiB, TiB, PiB) are powers of 1024, decimal ones
// (KB, MB, GB, TB, PB) of 1000; "B" is bytes; units are case-insensitive. A
// fractional result is rounded down to whole bytes.
type byteSize int64

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}

// parseByteSize parses s as described on byteSize. It refuses negative
// values, unknown units and values past int64.
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return unicode.IsLetter(r) })
	num, unit := t, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(t[:i]), strings.ToLower(t[i:])
	}
	mult, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (want B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, t[i:])
	}
	if strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("size %q: must not be negative", s)
	}
	if !isDecimal(num) {
		return 0, fmt.Errorf("size %q: not a number of bytes or a size like 141GiB", s)
	}
	r, _ := new(big.Rat).SetString(num)
	r.Mul(r, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n.Int64(), nil
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
// ("141GiB"), else in bytes; parseByteSize reads it back.
func formatByteSize(n int64) string {
	for _, u := range []struct {
		name string
		v    int64
	}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.v == 0 {
			return fmt.Sprintf("%d%s", n/u.v, u.name)
		}
	}
	return fmt.Sprintf("%d", n)
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
