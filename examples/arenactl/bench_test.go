package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/bench"
)

// benchArgs run every suite with tiny counts: these tests check the output's
// structure, never a time.
var benchArgs = []string{"bench", "--ops", "10", "--build-ops", "1", "--clients", "1,2", "--spin", "0,5us",
	"--configs", "../configs"}

func TestBenchJSON(t *testing.T) {
	r := cli(t, append(benchArgs, "--json")...).mustSucceed(t)
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	suites := map[bench.Suite]int{}
	for _, row := range rep.Rows {
		suites[row.Suite]++
		if row.Ops < 1 {
			t.Errorf("row %+v: no operations", row)
		}
	}
	for _, s := range bench.Suites {
		if suites[s] == 0 {
			t.Errorf("no %s rows", s)
		}
	}
	if rep.Device.Backend != "hostsim" {
		t.Errorf("device %+v, want hostsim", rep.Device)
	}
}

func TestBenchText(t *testing.T) {
	r := cli(t, append(benchArgs, "--suite", "dispatch,carve")...).mustSucceed(t)
	for _, want := range []string{"device: hostsim H200", "\ndispatch\n", "\ncarve\n", "p50", "p99", "ops/s",
		"chan-worker", "protoactor-naive", "gpuarena spin=5µs", "gpuarena spin=0s"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\ncontention\n") || strings.Contains(r.stdout, "\nbuild\n") {
		t.Errorf("suites not asked for were run:\n%s", r.stdout)
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--suite", "nope"},
		{"bench", "--clients", "0"},
		{"bench", "--ops", "0"},
		{"bench", "--duration", "-1s"},
		{"bench", "--build-ops", "0"},
		{"bench", "--spin", "-1us"},
		{"bench", "--manager-spin", "-1us"},
		{"bench", "--backend", "tpu"},
	} {
		r := cli(t, args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "arenactl: ") {
			t.Errorf("%v: exit %d, stderr %q: want exit %d and an error", args, r.code, r.stderr, exitFailure)
		}
	}
}
