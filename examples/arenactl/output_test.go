package main

import (
	"strings"
	"testing"
)

func TestParamCount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"},
		{7, "7"},
		{5_120, "5,120"},
		{999_999, "999,999"},
		{1_000_000, "1.0M"},
		{1_234_567, "1.2M"},
		{751_632_384, "751.6M"},
		{999_949_999, "999.9M"},
		{999_999_999, "1.00B"},
		{1_000_000_000, "1.00B"},
		{8_030_261_248, "8.03B"},
		{671_026_419_712, "671.03B"},
	} {
		if got := paramCount(tc.n); got != tc.want {
			t.Errorf("paramCount(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// A tiny model's fit reports its parameters readably, not as 0.00B.
func TestFitTextShowsSmallParamCounts(t *testing.T) {
	r := cli(t, "fit", "--config", tinyConfig("tiny-llama"))
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "0.00B") || !strings.Contains(r.stdout, "M params, ") {
		t.Fatalf("the weights line does not give the parameters in millions:\n%s", r.stdout)
	}
}
