package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/internal/bench"
)

const benchLong = `Bench measures, on one device and in one run, how fast gpuarena reaches the
GPU thread against its peers, and what building an arena through the actors
costs against the same driver calls made directly. It prints one table per
suite: p50, p99 and mean latency of one operation, and operations per second
across all clients.

Suites (--suite, comma-separated, or all):
  dispatch    one client's round trip, empty and mem-info (cuMemGetInfo), for
              direct (the backend called on its own locked thread: the floor),
              chan-worker (gorgonia cu's Ctx.Do pattern), protoactor-naive
              (protoactor-go on a pinned dispatcher with no spin) and gpuarena
              (the GPU actor) at each --spin
  contention  the same from each count of --clients concurrent goroutines;
              vs is the throughput over the same subject's at 1 client
  build       arena build and release for each model at max_batch_tokens 512
              and 8192, pooled and discrete: through the actors
              (Manager.BuildArena + Release, a new Manager each cycle) vs the
              same driver calls made directly on a new locked thread; each
              cycle's build starts at least --build-idle (40 ms) after the
              previous release and at least --setup-idle (10 ms) after its
              setup, both subjects alike while --build-idle exceeds either
              setup plus --setup-idle (a driver allocation is slower the
              longer the device was idle); "in driver" is the time inside
              the driver calls; vs is actor mean over direct mean, with its
              95% confidence interval (from 10 cycles)
  carve       Manager.CarveSlab of small sizes from Qwen3-Next's
              ssm_rowwise_w_bf16 slab (fp8_rowwise), vs the carve arithmetic

Each row makes --ops operations (contention: at least 16 per client; build:
--build-ops cycles), or runs for --duration. The build suite's models
(--models) are read from --configs, by default the configs built into
arenactl (examples/configs). The defaults take about a minute on an
H200 host. --trace writes a Go execution trace of the run: each build and
release, and each driver call inside them, is a region.

--json prints {"device", "gomaxprocs", "date", "rows": [{"suite", "case",
"subject", "clients", "ops", "p50_ns", "p99_ns", "mean_ns", "max_ns",
"elapsed_ns", "ops_per_sec", "driver_mean_ns" (build), "ratio", "ratio_of",
"ratio_low", "ratio_high" (build: the ratio's 95% confidence interval)}]}.`

// benchCmd holds the flags of "arenactl bench".
type benchCmd struct {
	app         *app
	backend     backendFlags
	suites      []string
	ops         int
	duration    time.Duration
	buildOps    int
	buildIdle   time.Duration
	setupIdle   time.Duration
	clients     []int
	spins       []time.Duration
	managerSpin time.Duration
	configs     string
	models      []string
	batchTokens []int64
	traceOut    string
	jsonOut     bool
}

// newBenchCmd builds "arenactl bench".
func newBenchCmd(a *app) *cobra.Command {
	c := &benchCmd{app: a}
	def := bench.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "bench [--backend hostsim|cuda] [--suite dispatch|contention|build|carve|all] [flags]",
		Short: "Measure dispatch, contention, arena build and slab carve against the peers",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE:  c.run,
	}
	fs := cmd.Flags()
	c.backend.register(fs, true)
	fs.StringSliceVar(&c.suites, "suite", []string{"all"}, "suites to run: dispatch, contention, build, carve or all")
	fs.IntVar(&c.ops, "ops", def.Budget.Ops, "operations per row (dispatch, contention, carve)")
	fs.DurationVar(&c.duration, "duration", 0, "run each row for this long instead of --ops operations")
	fs.IntVar(&c.buildOps, "build-ops", def.BuildOps, "build-and-release cycles per build row")
	fs.DurationVar(&c.buildIdle, "build-idle", def.BuildIdle, "least time from a build cycle's release to the next cycle's build (shorter: faster, more variable driver allocations)")
	fs.DurationVar(&c.setupIdle, "setup-idle", def.SetupIdle, "least time from a build cycle's setup to its build")
	fs.IntSliceVar(&c.clients, "clients", def.Clients, "concurrent clients of the contention suite (and carve, up to 16)")
	fs.DurationSliceVar(&c.spins, "spin", def.Spins, "dispatcher spins the gpuarena rows are measured at")
	fs.DurationVar(&c.managerSpin, "manager-spin", def.ManagerSpin, "dispatcher spin of the managers the build and carve suites start")
	fs.StringVar(&c.configs, "configs", "", "folder of the models' config.json files (default: the built-in examples/configs)")
	fs.StringSliceVar(&c.models, "models", def.Models, "models of the build suite: names of config files in --configs, without .json")
	fs.Int64SliceVar(&c.batchTokens, "batch-tokens", def.BatchTokens, "max_batch_tokens values of the build suite")
	fs.StringVar(&c.traceOut, "trace", "", "write a Go execution trace of the run to this file (read it with go tool trace); build cycles are its regions")
	fs.BoolVar(&c.jsonOut, "json", false, "print the rows as JSON")
	return cmd
}

// config turns the flags into a bench configuration and the suites to run.
func (c *benchCmd) config(changed func(string) bool) (bench.Config, []bench.Suite, error) {
	cfg := bench.DefaultConfig()
	bc, err := c.backend.config(c.backend.ordinal, changed)
	if err != nil {
		return cfg, nil, err
	}
	suites, err := parseSuites(c.suites)
	if err != nil {
		return cfg, nil, err
	}
	switch {
	case c.ops < 1 && c.duration <= 0:
		return cfg, nil, fmt.Errorf("--ops %d: want at least 1 (or a --duration)", c.ops)
	case c.duration < 0:
		return cfg, nil, fmt.Errorf("--duration %v: must not be negative", c.duration)
	case c.buildOps < 1:
		return cfg, nil, fmt.Errorf("--build-ops %d: want at least 1", c.buildOps)
	case c.buildIdle < 0 || c.setupIdle < 0:
		return cfg, nil, fmt.Errorf("--build-idle %v, --setup-idle %v: must not be negative", c.buildIdle, c.setupIdle)
	case len(c.clients) == 0 || slices.ContainsFunc(c.clients, func(n int) bool { return n < 1 }):
		return cfg, nil, fmt.Errorf("--clients %v: want counts of at least 1", c.clients)
	case len(c.spins) == 0 || slices.ContainsFunc(c.spins, func(d time.Duration) bool { return d < 0 }):
		return cfg, nil, fmt.Errorf("--spin %v: want durations of at least 0", c.spins)
	case c.managerSpin < 0:
		return cfg, nil, fmt.Errorf("--manager-spin %v: must not be negative", c.managerSpin)
	case len(c.models) == 0:
		return cfg, nil, errors.New("--models: no model given")
	case len(c.batchTokens) == 0 || slices.ContainsFunc(c.batchTokens, func(n int64) bool { return n < 1 }):
		return cfg, nil, fmt.Errorf("--batch-tokens %v: want counts of at least 1", c.batchTokens)
	}
	cfg.Backend, cfg.BuildOps, cfg.Clients, cfg.Spins, cfg.ManagerSpin, cfg.ConfigDir = bc, c.buildOps, c.clients, c.spins, c.managerSpin, c.configs
	cfg.Models, cfg.BatchTokens, cfg.BuildIdle, cfg.SetupIdle = c.models, c.batchTokens, c.buildIdle, c.setupIdle
	cfg.Budget = bench.Budget{Ops: c.ops}
	if c.duration > 0 {
		cfg.Budget = bench.Budget{Duration: c.duration}
	}
	return cfg, suites, nil
}

// parseSuites reads --suite.
func parseSuites(names []string) ([]bench.Suite, error) {
	var out []bench.Suite
	for _, n := range names {
		s := bench.Suite(strings.TrimSpace(n))
		switch {
		case s == "all":
			return bench.Suites, nil
		case slices.Contains(bench.Suites, s):
			out = append(out, s)
		default:
			return nil, fmt.Errorf("--suite %q: want dispatch, contention, build, carve or all", n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--suite: no suite given")
	}
	return out, nil
}

// run measures and prints the tables.
func (c *benchCmd) run(cmd *cobra.Command, _ []string) (err error) {
	cfg, suites, err := c.config(cmd.Flags().Changed)
	if err != nil {
		return err
	}
	if c.configs == "" {
		dir, remove, berr := builtinConfigDir()
		if berr != nil {
			return berr
		}
		defer remove()
		cfg.ConfigDir = dir
	}
	if c.traceOut != "" {
		stop, err := startTrace(c.traceOut)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	log := c.app.logger
	cfg.OnRow = func(r bench.Row) {
		log.Info("bench: row", "suite", r.Suite, "case", r.Case, "subject", r.Subject, "clients", r.Clients,
			"p50", r.P50, "p99", r.P99, "mean", r.Mean, "ops_per_sec", int64(r.OpsPerSec))
	}
	rep, err := bench.Run(cmd.Context(), cfg, suites...)
	if err != nil && (rep == nil || cmd.Context().Err() == nil) {
		return err
	}
	// Complete, or interrupted (Ctrl-C): print what was measured, then say
	// it was interrupted.
	if c.jsonOut {
		return errors.Join(writeJSON(cmd.OutOrStdout(), rep), err)
	}
	return errors.Join(writeBenchText(cmd.OutOrStdout(), rep, cfg), err)
}

// benchNotes explain a suite's vs column.
var benchNotes = map[bench.Suite]string{
	bench.SuiteContention: "vs: ops/s over the same subject's ops/s at 1 client",
	bench.SuiteBuild:      "in driver: the mean time spent inside the backend's alloc, free and memset calls; vs: the actor's mean over the direct driver calls' mean, and its 95% confidence interval (a bootstrap over the cycles)",
}

// writeBenchText writes a header and one table per suite.
func writeBenchText(w io.Writer, rep *bench.Report, cfg bench.Config) error {
	budget := fmt.Sprintf("%d ops per row", cfg.Budget.Ops)
	if cfg.Budget.Duration > 0 {
		budget = fmt.Sprintf("%v per row", cfg.Budget.Duration)
	}
	fmt.Fprintf(w, "device: %s (%s %d), GOMAXPROCS %d, %s, %s; build: %d cycles per row, at least %v after the previous release and %v after setup; build and carve managers' spin: %v\n",
		rep.Device.Name, rep.Device.Backend, rep.Device.Ordinal, rep.GoMaxProcs, rep.Date.Format(time.DateOnly), budget, cfg.BuildOps, cfg.BuildIdle, cfg.SetupIdle, cfg.ManagerSpin)
	for _, s := range bench.Suites {
		var rows []bench.Row
		for _, r := range rep.Rows {
			if r.Suite == s {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", s)
		t := newTable(w)
		if s == bench.SuiteBuild {
			row(t, "case", "subject", "clients", "ops", "p50", "p99", "mean", "in driver", "ops/s", "vs", "vs 95% CI")
		} else {
			row(t, "case", "subject", "clients", "ops", "p50", "p99", "mean", "ops/s", "vs")
		}
		for _, r := range rows {
			if s == bench.SuiteBuild {
				row(t, r.Case, r.Subject, r.Clients, r.Ops, duration(r.P50), duration(r.P99), duration(r.Mean), duration(r.DriverMean), rate(r.OpsPerSec), ratio(r.Ratio), interval(r.RatioLow, r.RatioHigh))
			} else {
				row(t, r.Case, r.Subject, r.Clients, r.Ops, duration(r.P50), duration(r.P99), duration(r.Mean), rate(r.OpsPerSec), ratio(r.Ratio))
			}
		}
		if err := t.Flush(); err != nil {
			return err
		}
		if n, ok := benchNotes[s]; ok {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// duration formats d with three significant digits: "612ns", "1.25µs", "3.40ms".
func duration(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.3gs", d.Seconds())
	}
}

// rate formats operations per second: "1.05M", "23.6k", "812".
func rate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.3gM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.3gk", x/1e3)
	default:
		return fmt.Sprintf("%.0f", x)
	}
}

// ratio formats a row's ratio to its baseline ("1.04×"), empty for none.
func ratio(x float64) string {
	if x == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", x)
}

// interval formats a ratio's confidence interval ("0.97–1.12"), empty for
// none.
func interval(lo, hi float64) string {
	if lo == 0 && hi == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}
