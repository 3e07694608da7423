package main

import (
	"strings"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // -1: an error whose message contains msg
		msg  string
	}{
		{"0", 0, ""},
		{"0B", 0, ""},
		{"151397597184B", 151397597184, ""},
		{"141GiB", 141 << 30, ""},
		{"141 GiB", 141 << 30, ""},
		{"141gib", 141 << 30, ""},
		{"80GB", 80e9, ""},
		{"80GiB", 80 << 30, ""},
		{"1.5TiB", 3 << 39, ""},
		{"1.5GiB", 3 << 29, ""},
		{"512B", 512, ""},
		{"80", -1, "give a unit: 80GB (×10^9 B), 80GiB (×2^30 B) or 80B"},
		{"1.5", -1, "give a unit"},
		{"151397597184", -1, "give a unit"},
		{"1.5B", -1, "1.500 B is not a whole number of bytes"},
		{"0.1KiB", -1, "not a whole number of bytes"},
		{"8EiB", -1, "unknown unit"},
		{"-1", -1, "must not be negative"},
		{"", -1, "not a size"},
		{"GiB", -1, "not a size"},
		{"1e9", -1, "unknown unit"},
		{"1/2GiB", -1, "not a size"},
		{"12QB", -1, "unknown unit"},
		{"0x10", -1, "unknown unit"},
		{"9223372036854775808B", -1, "too large"},
		{"8192PiB", -1, "too large"},
	} {
		got, err := parseByteSize(tc.in)
		if tc.want < 0 {
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("parseByteSize(%q) = %d, %v; want an error saying %q", tc.in, got, err, tc.msg)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatByteSizeRoundTrips(t *testing.T) {
	for _, n := range []int64{0, 1, 1023, 1024, 141 << 30, 80e9, 3 << 39, 150_109_880_320} {
		s := formatByteSize(n)
		got, err := parseByteSize(s)
		if err != nil || got != n {
			t.Errorf("parseByteSize(formatByteSize(%d) = %q) = %d, %v", n, s, got, err)
		}
	}
	if s := formatByteSize(141 << 30); s != "141GiB" {
		t.Errorf("formatByteSize(141 GiB) = %q, want 141GiB", s)
	}
}

// FuzzParseByteSize: any input parses to a size that formats and parses
// back to itself, or is refused; a bare non-zero number is always refused.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"80", "80GB", "1.5GiB", "1.5B", "0", "9223372036854775807B", "  2 tib "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseByteSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseByteSize(%q) = %d", s, n)
		}
		if back, err := parseByteSize(formatByteSize(n)); err != nil || back != n {
			t.Fatalf("%q → %d → %q → %d, %v", s, n, formatByteSize(n), back, err)
		}
		if isDecimal(strings.TrimSpace(s)) && n != 0 {
			t.Fatalf("bare number %q read as %d B", s, n)
		}
	})
}
