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

// A size prints in the unit it is a round number of, else in bytes with
// its readable value beside it: never as a count of an awkward unit
// ("146591680KiB").
func TestByteSizeString(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{512, "512B"},
		{1000, "1000B"},
		{1023, "1023B"},
		{1536, "1.5KiB"},
		{1 << 30, "1GiB"},
		{141 << 30, "141GiB"},
		{3 << 39, "1.5TiB"},
		{80e9, "80GB"},
		{5_000_000_000, "5GB"},
		{1 << 62, "4096PiB"},
		{150_109_880_320, "150109880320B ≈ 139.8GiB"},
		{1025, "1025B ≈ 1.0KiB"},
	} {
		b := byteSize(tc.n)
		if got := b.String(); got != tc.want {
			t.Errorf("byteSize(%d).String() = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// Every size flag's default reads as a size a user would type.
func TestHelpShowsReadableSizeDefaults(t *testing.T) {
	for _, c := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"fit", "--help"}, "(default 150109880320B ≈ 139.8GiB)"},
		{[]string{"fit", "--help"}, "(default 1GiB)"},
		{[]string{"gen-model", "--help"}, "(default 5GB)"},
	} {
		r := cli(t, c.cmd...).mustSucceed(t)
		if !strings.Contains(r.stdout, c.want) {
			t.Errorf("arenactl %v: no %q in:\n%s", c.cmd, c.want, r.stdout)
		}
		if strings.Contains(r.stdout, "KiB)") && strings.Contains(r.stdout, "146591680") {
			t.Errorf("arenactl %v prints the H200's memory in KiB", c.cmd)
		}
	}
}
