package main

import "testing"

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"151397597184", 151397597184},
		{"141GiB", 141 << 30},
		{"141 GiB", 141 << 30},
		{"141gib", 141 << 30},
		{"80GB", 80e9},
		{"1.5TiB", 3 << 39},
		{"512B", 512},
		{"1.5B", 1}, // rounded down
		{"8EiB" + "", -1},
		{"-1", -1},
		{"", -1},
		{"GiB", -1},
		{"1e9", -1},
		{"1/2GiB", -1},
		{"12QB", -1},
		{"0x10", -1},
		{"9223372036854775808", -1},
		{"8192PiB", -1},
	} {
		got, err := parseByteSize(tc.in)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("parseByteSize(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatByteSizeRoundTrips(t *testing.T) {
	for _, n := range []int64{0, 1, 1023, 1024, 141 << 30, 80e9, 3 << 39} {
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
