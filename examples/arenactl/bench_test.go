package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"

	xtrace "golang.org/x/exp/trace"

	"github.com/gpuarena/gpuarena/internal/bench"
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
		{"bench", "--batch-tokens", "0"},
		{"bench", "--build-idle", "-1ms"},
		{"bench", "--setup-idle", "-1ms"},
		{"bench", "--models", ""},
		{"bench", "--suite", "build", "--models", "no-such-model"},
		{"bench", "--suite", "dispatch", "--trace", "/no/such/dir/trace.out"},
	} {
		r := cli(t, args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "arenactl: ") {
			t.Errorf("%v: exit %d, stderr %q: want exit %d and an error", args, r.code, r.stderr, exitFailure)
		}
	}
}

// TestBenchBuildTrace runs the build suite for one model and one
// max_batch_tokens, and checks that the trace it wrote holds a region for
// each timed build and the driver calls inside them.
func TestBenchBuildTrace(t *testing.T) {
	if trace.IsEnabled() {
		t.Skip("an execution trace is running (go test -trace): bench --trace cannot start another")
	}
	path := filepath.Join(t.TempDir(), "bench.trace")
	r := cli(t, "bench", "--suite", "build", "--build-ops", "2", "--models", "llama-3.1-8b", "--batch-tokens", "512",
		"--configs", "../configs", "--trace", path, "--json").mustSucceed(t)
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	// One model, one max_batch_tokens, two layouts: build and release, actor
	// and direct.
	if len(rep.Rows) != 8 {
		t.Fatalf("%d rows, want 8: %+v", len(rep.Rows), rep.Rows)
	}
	for _, row := range rep.Rows {
		if !strings.HasPrefix(row.Case, "llama-3.1-8b M=512 ") || row.Ops != 2 {
			t.Errorf("row %q (%s): %d ops, want llama-3.1-8b M=512 and 2 ops", row.Case, row.Subject, row.Ops)
		}
	}
	regions := traceRegions(t, path)
	// Warm-up cycle included: 3 cycles per layout.
	for name, want := range map[string]int{"actor build": 6, "direct build": 6, "actor release": 6, "direct release": 6} {
		if regions[name] != want {
			t.Errorf("%d %q regions, want %d (all: %v)", regions[name], name, want, regions)
		}
	}
	if regions["driver alloc"] == 0 || regions["driver free"] == 0 || regions["driver memset"] == 0 {
		t.Errorf("no driver call regions: %v", regions)
	}
}

// traceRegions counts the regions of the execution trace at path, by name.
func traceRegions(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := xtrace.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for {
		ev, err := rd.ReadEvent()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind() == xtrace.EventRegionBegin {
			n[ev.Region().Type]++
		}
	}
}
