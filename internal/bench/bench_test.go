package bench_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/bench"
)

// These tests check structure only — counts, rows, that every measurement
// made operations — with tiny operation counts. None asserts a time.

func hostsim() (gpuworker.Backend, error) { return gpuworker.NewHostSim(gpuworker.HostSimConfig{}) }

func TestSummarize(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(100 - i) // 100 … 1, unsorted
	}
	s := bench.Summarize(d, time.Second)
	want := bench.Summary{Ops: 100, P50: 50, P99: 99, Mean: 50, Max: 100, Elapsed: time.Second, OpsPerSec: 100}
	if s != want {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	if d[0] != 100 || d[99] != 1 {
		t.Errorf("Summarize reordered its input: d[0] = %v, d[99] = %v, want 100 and 1", d[0], d[99])
	}
	if s := bench.Summarize(nil, 0); s.Ops != 0 || s.OpsPerSec != 0 {
		t.Errorf("Summarize(nil) = %+v, want zeros", s)
	}
}

func TestDriveCounts(t *testing.T) {
	for _, clients := range []int{1, 3, 8} {
		var calls atomic.Int64
		sum, err := bench.Drive(clients, bench.Budget{Ops: 24}, func() error { calls.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if sum.Ops != 24 || calls.Load() != 24 {
			t.Errorf("%d clients: %d ops recorded, %d made, want 24", clients, sum.Ops, calls.Load())
		}
	}
}

func TestDriveStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	sum, err := bench.Drive(1, bench.Budget{Ops: 10}, func() error {
		calls++
		if calls == 4 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || sum.Ops != 3 {
		t.Errorf("ops %d, err %v: want 3 ops and boom", sum.Ops, err)
	}
	if _, err := bench.Drive(4, bench.Budget{Ops: 100}, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("4 clients: err %v, want boom", err)
	}
	if _, err := bench.Drive(0, bench.Budget{Ops: 1}, func() error { return nil }); err == nil {
		t.Error("0 clients: no error")
	}
}

func TestDriveDuration(t *testing.T) {
	sum, err := bench.Drive(2, bench.Budget{Duration: time.Millisecond, Ops: 50}, func() error { return nil })
	if err != nil || sum.Ops < 1 || sum.Ops > 50 {
		t.Errorf("ops %d, err %v: want 1 to 50 ops", sum.Ops, err)
	}
}

// TestSubjects starts every subject, makes a few round trips of each kind,
// concurrently where the subject allows it, and closes it.
func TestSubjects(t *testing.T) {
	for _, s := range bench.Subjects(bench.Kinds, []time.Duration{0, 5 * time.Microsecond}) {
		t.Run(s.Name(), func(t *testing.T) {
			target, err := s.Start(hostsim)
			if err != nil {
				t.Fatal(err)
			}
			clients := 1
			if target.Concurrent() {
				clients = 4
			}
			err = target.Exec(func(call func(bench.Op) error) error {
				for _, op := range bench.Ops {
					sum, err := bench.Drive(clients, bench.Budget{Ops: 8}, func() error { return call(op) })
					if err != nil {
						return err
					}
					if sum.Ops != 8 {
						t.Errorf("%s: %d ops, want 8", op, sum.Ops)
					}
				}
				return nil
			})
			if err := errors.Join(err, target.Close()); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := (bench.Subject{Kind: "nope"}).Start(hostsim); err == nil {
		t.Error("unknown kind: no error")
	}
}

// TestRun runs every suite with tiny counts and checks the rows it reports.
func TestRun(t *testing.T) {
	cfg := bench.DefaultConfig()
	// Enough build cycles for a ratio's interval, spaced by nothing: the
	// simulated device has no idle state.
	cfg.Budget, cfg.BuildOps, cfg.BuildIdle, cfg.SetupIdle = bench.Budget{Ops: 10}, bench.MinRatioCycles, 0, 0
	cfg.Clients, cfg.Spins = []int{1, 3}, []time.Duration{0, 5 * time.Microsecond}
	cfg.ConfigDir, cfg.Models, cfg.BatchTokens, cfg.CarveSizes = "../../examples/configs", []string{"llama-3.1-8b"}, []int64{512}, []int64{4096}
	var seen int
	cfg.OnRow = func(bench.Row) { seen++ }
	rep, err := bench.Run(context.Background(), cfg, bench.Suites...)
	if err != nil {
		t.Fatal(err)
	}
	count := map[bench.Suite]int{}
	for _, r := range rep.Rows {
		count[r.Suite]++
		if r.Ops < 1 || r.Clients < 1 || r.Case == "" || r.Subject == "" {
			t.Errorf("row %+v: want ops and clients ≥ 1, a case and a subject", r)
		}
		if r.Suite == bench.SuiteBuild && r.Subject == bench.SubjectActor &&
			(r.RatioOf == "" || r.RatioLow <= 0 || r.RatioLow > r.RatioHigh) {
			t.Errorf("build row %+v: want a ratio to the direct calls and its confidence interval", r)
		}
	}
	want := map[bench.Suite]int{
		bench.SuiteDispatch:   5 * 2,     // direct, chan-worker, protoactor-naive, gpuarena × 2 spins; × 2 ops
		bench.SuiteContention: 4 * 2 * 2, // the four that take clients × 2 ops × 2 client counts
		bench.SuiteBuild:      2 * 2 * 2, // 2 layouts × build, release × actor, direct
		bench.SuiteCarve:      1 + 2,     // direct, and the actor at 1 and 3 clients
	}
	for s, n := range want {
		if count[s] != n {
			t.Errorf("%s: %d rows, want %d", s, count[s], n)
		}
	}
	if seen != len(rep.Rows) || rep.Device.Backend != gpuworker.KindHostSim || rep.GoMaxProcs < 1 {
		t.Errorf("OnRow saw %d of %d rows; device %+v, GOMAXPROCS %d", seen, len(rep.Rows), rep.Device, rep.GoMaxProcs)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	for name, edit := range map[string]func(*bench.Config){
		"no budget":      func(c *bench.Config) { c.Budget = bench.Budget{} },
		"no build ops":   func(c *bench.Config) { c.BuildOps = 0 },
		"negative idle":  func(c *bench.Config) { c.BuildIdle = -time.Millisecond },
		"zero clients":   func(c *bench.Config) { c.Clients = []int{0} },
		"negative spin":  func(c *bench.Config) { c.Spins = []time.Duration{-1} },
		"zero carve":     func(c *bench.Config) { c.CarveSizes = []int64{0} },
		"unknown config": func(c *bench.Config) { c.ConfigDir = t.TempDir() },
	} {
		cfg := bench.DefaultConfig()
		edit(&cfg)
		suite := bench.SuiteDispatch
		if name == "unknown config" {
			suite = bench.SuiteBuild
		}
		if _, err := bench.Run(context.Background(), cfg, suite); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A misspelt model fails the run before anything is measured, and the error
// lists the models there are.
func TestRunRefusesAnUnknownModelFirst(t *testing.T) {
	cfg := bench.DefaultConfig()
	cfg.ConfigDir, cfg.Models = "../../examples/configs", []string{"llama-3.1-8B"}
	measured := 0
	cfg.OnRow = func(bench.Row) { measured++ }
	_, err := bench.Run(context.Background(), cfg, bench.SuiteDispatch, bench.SuiteBuild)
	if err == nil || !strings.Contains(err.Error(), `model "llama-3.1-8B"`) || !strings.Contains(err.Error(), "llama-3.1-8b, ") {
		t.Fatalf("error %v: want it to name the model and list the configs (llama-3.1-8b among them)", err)
	}
	if measured != 0 {
		t.Fatalf("%d rows measured before the error, want none", measured)
	}
}

// A run whose context is done stops at its next operation and returns the
// context's error with the rows measured before: here the context is
// cancelled when the first row is reported, so that row is all there is.
func TestRunStopsWhenItsContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := bench.DefaultConfig()
	cfg.Budget = bench.Budget{Ops: 200}
	cfg.Spins = []time.Duration{0}
	cfg.OnRow = func(bench.Row) { cancel() }
	rep, err := bench.Run(ctx, cfg, bench.SuiteDispatch)
	if !errors.Is(err, context.Canceled) || rep == nil {
		t.Fatalf("Run: %v, report %v; want context.Canceled and the report so far", err, rep)
	}
	if len(rep.Rows) != 1 {
		t.Fatalf("%d rows, want the 1 reported before the cancellation", len(rep.Rows))
	}
}

func TestRatioCI95(t *testing.T) {
	us := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Microsecond
		}
		return d
	}
	direct := us(500, 620, 480, 710, 530, 560, 650, 490, 600, 520)
	twice := make([]time.Duration, len(direct))
	for i, d := range direct {
		twice[i] = 2 * d
	}
	if lo, hi := bench.RatioCI95(twice, direct); lo != 2 || hi != 2 {
		t.Errorf("a = 2b: interval %v–%v, want 2–2", lo, hi)
	}
	// Each cycle's actor build takes 100 µs longer than its direct one, but
	// for one slow cycle: the interval holds the ratio of the means and is
	// not a point.
	actor := us(600, 720, 580, 810, 630, 660, 1750, 590, 700, 620)
	lo, hi := bench.RatioCI95(actor, direct)
	mean := func(d []time.Duration) float64 {
		var s time.Duration
		for _, x := range d {
			s += x
		}
		return float64(s) / float64(len(d))
	}
	if r := mean(actor) / mean(direct); !(lo < r && r < hi) || lo < 1.1 || hi > 2 {
		t.Errorf("interval %.3f–%.3f for a ratio of %.3f: want it to hold the ratio, within 1.1–2", lo, hi, r)
	}
	if lo2, hi2 := bench.RatioCI95(actor, direct); lo2 != lo || hi2 != hi {
		t.Errorf("second call gave %v–%v, first %v–%v: want the same (a seeded bootstrap)", lo2, hi2, lo, hi)
	}
	ten := us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	for _, c := range []struct{ a, b []time.Duration }{
		{ten[:bench.MinRatioCycles-1], ten[:bench.MinRatioCycles-1]}, // too few cycles
		{ten, ten[:9]},                   // unpaired
		{ten, make([]time.Duration, 10)}, // b sums to zero
	} {
		if lo, hi := bench.RatioCI95(c.a, c.b); lo != 0 || hi != 0 {
			t.Errorf("RatioCI95(%v, %v) = %v–%v, want 0–0", c.a, c.b, lo, hi)
		}
	}
}

// TestRatioCI95Coverage draws build times with a known ratio of means (1.1)
// many times over and checks how often the interval holds it: a percentile
// bootstrap falls short of 95% on small samples, but at the default 20
// cycles it must not fall far.
func TestRatioCI95Coverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const trials, cycles, ratio = 200, 20, 1.1
	held := 0
	for range trials {
		a, b := make([]time.Duration, cycles), make([]time.Duration, cycles)
		for i := range cycles {
			direct := 500 * math.Exp(0.3*rng.NormFloat64()-0.045) // mean 500 µs
			b[i] = time.Duration(direct * 1e3)
			a[i] = time.Duration((ratio*direct + 40*rng.NormFloat64()) * 1e3)
		}
		if lo, hi := bench.RatioCI95(a, b); lo <= ratio && ratio <= hi {
			held++
		}
	}
	if held < trials*85/100 {
		t.Errorf("%d cycles: the interval held the ratio in %d of %d trials, want at least 85%%", cycles, held, trials)
	}
}
