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

// sizeUnit is one unit a size can be written in.
type sizeUnit struct {
	name string
	v    int64
}

// binaryUnits and decimalUnits are the units formatByteSize writes, largest
// first.
var (
	binaryUnits  = []sizeUnit{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	decimalUnits = []sizeUnit{{"PB", 1e15}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}}
)

// formatByteSize writes n > 0 as a user would type it, exactly, so that
// parseByteSize reads it back: in the largest binary unit n holds at least
// once, when that is a number of at most two decimals ("141GiB",
// "1.5TiB"), else the same in decimal units ("80GB"), else in bytes
// ("150109880320B"); below 1 KiB always in bytes. 0 is "0".
func formatByteSize(n int64) string {
	if n == 0 {
		return "0"
	}
	if n >= 1<<10 {
		for _, units := range [][]sizeUnit{binaryUnits, decimalUnits} {
			if s, ok := exactIn(n, units); ok {
				return s
			}
		}
	}
	return fmt.Sprintf("%dB", n)
}

// exactIn writes n in the largest of units it holds at least once, and
// reports whether that is exact in at most two decimals.
func exactIn(n int64, units []sizeUnit) (string, bool) {
	for _, u := range units {
		if n < u.v {
			continue
		}
		whole, rem := n/u.v, n%u.v // rem < 2^50, so rem×100 fits
		if rem*100%u.v != 0 {
			return "", false
		}
		if rem == 0 {
			return fmt.Sprintf("%d%s", whole, u.name), true
		}
		frac := strings.TrimRight(fmt.Sprintf("%02d", rem*100/u.v), "0")
		return fmt.Sprintf("%d.%s%s", whole, frac, u.name), true
	}
	return "", false
}

// readableByteSize is n ≥ 1 KiB rounded to one decimal in the largest
// binary unit it holds at least once: "139.8GiB". Not exact; for reading.
func readableByteSize(n int64) string {
	for _, u := range binaryUnits {
		if n >= u.v {
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.v), u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// String implements pflag.Value, and is what the help shows as a flag's
// default: formatByteSize's exact form, and where that is a byte count of
// 1 KiB or more, the readable size beside it ("150109880320B ≈ 139.8GiB",
// an H200's total).
func (b *byteSize) String() string {
	n := int64(*b)
	s := formatByteSize(n)
	if n >= 1<<10 && isDecimal(strings.TrimSuffix(s, "B")) {
		return s + " ≈ " + readableByteSize(n)
	}
	return s
}

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
