package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// runKeys are the keys run --json prints first, in this order.
var runKeys = []string{"arena_bytes", "build_ms", "steps", "max_concurrent_forwards", "backend_threads",
	"ledger_bytes_after_release", "goroutines_before", "goroutines_after",
	"device_free_before", "device_free_built", "device_free_after"}

func TestRunJSON(t *testing.T) {
	for _, tc := range []struct {
		model string
		extra []string
	}{
		{"qwen3-next-80b-a3b-thinking", nil},
		{"qwen3-next-80b-a3b-thinking", []string{"--fp8-rowwise"}}, // with a slab to carve
		{"deepseek-v3", nil},
		{"llama-3.1-8b", nil},
		{"llama-3.1-8b", []string{"--layout", "discrete"}},
	} {
		t.Run(tc.model+strings.Join(tc.extra, ""), func(t *testing.T) {
			args := append([]string{"run", "--config", configPath(tc.model), "--json", "--steps", "20", "--clients", "4"}, tc.extra...)
			r := cli(t, args...).mustSucceed(t)
			if got := topLevelKeys(t, r.stdout); strings.Join(got[:len(runKeys)], ",") != strings.Join(runKeys, ",") {
				t.Errorf("keys %v: want %v first", got, runKeys)
			}
			var rep runReport
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			plan := planOf(t, tc.model, tc.extra...)
			switch {
			case rep.Steps != 20:
				t.Errorf("steps %d, want 20", rep.Steps)
			case rep.MaxConcurrentForwards != 1:
				t.Errorf("max_concurrent_forwards %d, want 1", rep.MaxConcurrentForwards)
			case rep.BackendThreads != 1:
				t.Errorf("backend_threads %d, want 1", rep.BackendThreads)
			case rep.LedgerBytesAfterRelease != 0:
				t.Errorf("ledger_bytes_after_release %d, want 0", rep.LedgerBytesAfterRelease)
			case rep.ArenaBytes != plan.TotalBytes:
				t.Errorf("arena_bytes %d, want the plan's total %d", rep.ArenaBytes, plan.TotalBytes)
			case rep.DeviceFreeAfter != rep.DeviceFreeBefore:
				t.Errorf("device_free_after %d, want device_free_before %d", rep.DeviceFreeAfter, rep.DeviceFreeBefore)
			case rep.DeviceFreeBefore-rep.DeviceFreeBuilt != rep.ArenaBytes:
				t.Errorf("device_free before %d − built %d, want arena_bytes %d", rep.DeviceFreeBefore, rep.DeviceFreeBuilt, rep.ArenaBytes)
			case rep.GoroutinesAfter > rep.GoroutinesBefore:
				t.Errorf("goroutines_after %d > goroutines_before %d", rep.GoroutinesAfter, rep.GoroutinesBefore)
			case len(rep.InvariantsFailed) != 0:
				t.Errorf("invariants_failed %v", rep.InvariantsFailed)
			case len(plan.Slabs) > 0 && len(rep.SlabCarves) != len(carveSizes)*len(plan.Slabs):
				t.Errorf("%d slab carves, want %d", len(rep.SlabCarves), len(carveSizes)*len(plan.Slabs))
			}
		})
	}
}

// planOf is arena's plan for model under the plan flags in args.
func planOf(t *testing.T, model string, args ...string) *arena.Plan {
	t.Helper()
	cfg, err := arena.LoadConfig(configPath(model))
	if err != nil {
		t.Fatal(err)
	}
	opts := arena.DefaultOptions()
	for _, a := range args {
		switch a {
		case "--fp8-rowwise":
			opts.FP8Rowwise = true
		case "--layout", "discrete": // not a plan flag
		default:
			t.Fatalf("planOf: flag %s not handled", a)
		}
	}
	plan, err := arena.PlanFor(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func TestRunText(t *testing.T) {
	r := cli(t, "run", "--config", configPath("llama-3.1-8b"), "--steps", "5", "--clients", "3").mustSucceed(t)
	for _, want := range []string{"5 steps from 3 clients", "max concurrent forwards  1", "backend threads          1", "invariants: all hold"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run report lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestRunMoreClientsThanSteps: clients without a step submit nothing.
func TestRunMoreClientsThanSteps(t *testing.T) {
	r := cli(t, "run", "--config", configPath("llama-3.1-8b"), "--steps", "2", "--clients", "8", "--json").mustSucceed(t)
	var rep runReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Steps != 2 || rep.MaxConcurrentForwards != 1 {
		t.Errorf("steps %d, max_concurrent_forwards %d; want 2 and 1", rep.Steps, rep.MaxConcurrentForwards)
	}
}

func TestInvariantsReported(t *testing.T) {
	rep := &runReport{MaxConcurrentForwards: 2, BackendThreads: 3, LedgerBytesAfterRelease: 5,
		GoroutinesBefore: 3, GoroutinesAfter: 4, ArenaBytes: 10, ExpectedArenaBytes: 12, Layout: "pooled", DeviceFreeBefore: 100, DeviceFreeBuilt: 90, DeviceFreeAfter: 95}
	rep.checkInvariants(true)
	got := strings.Join(rep.InvariantsFailed, "\n")
	for _, want := range []string{"max_concurrent_forwards is 2", "backend_threads is 3", "ledger_bytes_after_release is 5",
		"goroutines_after is 4", "device_free_after is 95", "arena_bytes is 10, want 12"} {
		if !strings.Contains(got, want) {
			t.Errorf("invariants failed %q: lacks %q", got, want)
		}
	}
}

// TestRunCancelled: a run whose context is done stops with an error and
// still closes the manager (goleak checks nothing is left running).
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code := execute(ctx, []string{"run", "--config", configPath("llama-3.1-8b"), "--steps", "3"}, &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "context canceled") {
		t.Errorf("exit %d, stderr %q: want exit %d and the context's error", code, stderr.String(), exitFailure)
	}
}

// --ledger-out writes the ledger after the build: the pool and a view per
// buffer, with the counters.
func TestRunLedgerOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	cli(t, "run", "--config", configPath("llama-3.1-8b"), "--max-batch-tokens", "512", "--steps", "2", "--ledger-out", path).mustSucceed(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l device.Ledger
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	cfg, err := arena.LoadConfig(configPath("llama-3.1-8b"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	views := 0
	for _, b := range plan.Buffers {
		if b.Present() {
			views++
		}
	}
	if len(l.Entries) != 1+views || l.Entries[0].Label != "arena_pool" || l.Counters.Allocations != 1 || l.Counters.CurrentBytes < plan.BufferBytes {
		t.Fatalf("ledger: %d entries (first %+v), counters %+v; want the pool and %d views", len(l.Entries), l.Entries[0], l.Counters, views)
	}
}
