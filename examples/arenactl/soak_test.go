package main

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// A short soak: it prints progress lines and a summary, every client of
// every cycle ends on exactly one ErrClosed (Close ran under load each
// cycle), and every invariant holds.
func TestSoakShort(t *testing.T) {
	r := cli(t, "soak", "--duration", "1200ms", "--clients", "6", "--interval", "200ms", "--cycle", "400ms",
		"--config", configPath("qwen3-next-80b-a3b-thinking"), "--max-batch-tokens", "64").mustSucceed(t)
	if !strings.Contains(r.stdout, "invariants: all hold") || !strings.Contains(r.stdout, "] cycle ") {
		t.Fatalf("no progress lines or summary:\n%s", r.stdout)
	}
	cycles := atoiMatch(t, r.stdout, `(\d+) cycles of up to 400ms`)
	closes := atoiMatch(t, r.stdout, `close under load\s+(\d+) closes with 6 clients`)
	closed := atoiMatch(t, r.stdout, `errors by kind.*closed (\d+)`)
	if cycles < 2 || closes != cycles || closed != 6*cycles {
		t.Fatalf("%d cycles, %d closes, %d ErrClosed; want ≥ 2 cycles, one close each, and one ErrClosed per client per cycle:\n%s", cycles, closes, closed, r.stdout)
	}
	if ops := atoiMatch(t, r.stdout, `operations\s+(\d+) \(`); ops < 100 {
		t.Fatalf("%d operations in 1.2 s", ops)
	}
}

func atoiMatch(t *testing.T, s, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no match for %q in:\n%s", re, s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSoakBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--clients", "0"}, "--clients 0"},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--interval", "-1s"}, "--interval"},
		{[]string{"--cycle", "0s"}, "--cycle"},
		{[]string{"--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization"},
		{[]string{"--backend", "tpu"}, `--backend "tpu"`},
		{[]string{"--config", configPath("llama-3.1-8b"), "--max-batch-tokens", "-1"}, "--max-batch-tokens"},
		{[]string{"--config", "nope.json"}, "nope.json"},
	} {
		r := cli(t, append([]string{"soak", "--duration", "1s"}, c.args...)...)
		if r.code != exitFailure || !strings.Contains(r.stderr, c.want) {
			t.Errorf("soak %v: exit %d, stderr %q; want exit %d naming %q", c.args, r.code, r.stderr, exitFailure, c.want)
		}
	}
}

// lyingSim reports one byte more in use than it holds: the soak must see the
// ledger and the backend disagree.
type lyingSim struct{ *gpuworker.HostSim }

func (l lyingSim) BytesInUse() int64 { return l.HostSim.BytesInUse() + 1 }

func TestSoakReportsABrokenInvariant(t *testing.T) {
	cfg, err := arena.LoadConfig(configPath("llama-3.1-8b"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	s := &soak{plan: plan, clients: 2, duration: 200 * time.Millisecond, interval: time.Hour, cycle: time.Hour,
		utilization: 0.9, out: &out, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), backend: gpuworker.KindHostSim,
		device: func() (gpuworker.BackendFactory, func() int64, error) {
			sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
			return func() (gpuworker.Backend, error) { return lyingSim{sim}, nil }, sim.BytesInUse, err
		}}
	rep, err := s.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	breaks := rep.broken()
	if len(breaks) == 0 || !strings.Contains(strings.Join(breaks, "\n"), "the backend") {
		t.Fatalf("broken invariants %q, want the ledger and the backend disagreeing", breaks)
	}
	rep.writeSummary(&out, s)
	if !strings.Contains(out.String(), "invariants BROKEN") {
		t.Fatalf("the summary does not say so:\n%s", out.String())
	}
}

// A soak whose first build fails reports the error alone, with no summary
// claiming that the invariants hold over what never ran.
func TestSoakThatCannotStartPrintsNoSummary(t *testing.T) {
	r := cli(t, "soak", "--duration", "1s", "--device-memory", "1GiB",
		"--config", configPath("qwen3-next-80b-a3b-thinking"))
	if r.code == exitOK || !strings.Contains(r.stderr, "out of device memory") {
		t.Fatalf("exit %d, stderr %q: want a failure naming the out-of-memory", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "invariants") {
		t.Fatalf("a summary was printed:\n%s", r.stdout)
	}
}
