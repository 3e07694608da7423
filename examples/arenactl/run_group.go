package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// groupFlags are run's flags for several devices (run_group.go).
type groupFlags struct {
	devices        string // --devices: a machine or a count; "" runs one device
	tensorParallel int64  // --tensor-parallel-size
	rank           int64  // --rank: without --devices, the one rank to build (run_rank.go)
}

// register adds --devices and --tensor-parallel-size to fs.
func (f *groupFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.devices, "devices", "",
		"run on several devices, one GPU actor each, with lockstep group steps (gpuarena.Group): on hostsim a machine, "+
			"N simulated H200s (\"2\"), a preset (\"h100-80gb\") or N of one (\"8xh200\"); on cuda a count N (ordinals 0 to N-1)")
	fs.Int64Var(&f.tensorParallel, "tensor-parallel-size", 1,
		"with --devices: tensor_parallel_size, each rank's arena sized by arena.PlanRanks (must equal the device count when > 1); "+
			"1 builds the same plan on every rank; with --rank the layout whose one rank this device builds")
	fs.Int64Var(&f.rank, "rank", 0,
		"without --devices: build only this global rank of the --tensor-parallel-size layout on the one device — its weight shard with --model "+
			"(Manager.LoadWeightsRank), its arena and its KV cache of the layout's blocks, serving a trace as --kv does — and check the ledger against the rank's fit "+
			"(arena.FitRank, to the byte): one GPU checks the heaviest rank of a layout it has not the GPUs for")
}

// groupReport is what run --devices reports.
type groupReport struct {
	ModelType          string            `json:"model_type"`
	Config             string            `json:"config"`
	Backend            string            `json:"backend"`
	Devices            int               `json:"devices"`
	TensorParallelSize int64             `json:"tensor_parallel_size"`
	PlanSource         string            `json:"plan_source"`
	Spin               string            `json:"spin"`
	Steps              int               `json:"steps"`
	StepP50US          float64           `json:"step_p50_us"`
	StepP99US          float64           `json:"step_p99_us"`
	BuildMS            float64           `json:"build_ms"`
	GoroutinesBefore   int               `json:"goroutines_before"`
	GoroutinesAfter    int               `json:"goroutines_after"`
	Ranks              []groupRankReport `json:"ranks"`
	InvariantsFailed   []string          `json:"invariants_failed,omitempty"`
}

// groupRankReport is one rank of a groupReport.
type groupRankReport struct {
	Rank                    int    `json:"rank"`
	Ordinal                 int    `json:"ordinal"`
	Device                  string `json:"device"`
	TotalBytes              int64  `json:"total_bytes"`
	BudgetBytes             int64  `json:"budget_bytes"`
	PlanBytes               int64  `json:"plan_bytes"`
	ArenaBytes              int64  `json:"arena_bytes"`
	ExpectedArenaBytes      int64  `json:"expected_arena_bytes"`
	Steps                   int    `json:"steps"`
	MaxConcurrentForwards   int64  `json:"max_concurrent_forwards"`
	BackendThreads          int    `json:"backend_threads"`
	LedgerBytesAfterRelease int64  `json:"ledger_bytes_after_release"`
	DeviceFreeBefore        int64  `json:"device_free_before"`
	DeviceFreeAfter         int64  `json:"device_free_after"`
}

func (r *groupReport) failed(what string) { r.InvariantsFailed = append(r.InvariantsFailed, what) }

// groupBackends are the ranks' backends --devices names (deviceBackends).
func (c *runCmd) groupBackends(changed func(string) bool) ([]gpuworker.BackendFactory, error) {
	if changed("device-memory") || changed("device") {
		return nil, errors.New("--devices: names the devices itself; leave out --device and --device-memory")
	}
	return deviceBackends(c.backend.kind, c.group.devices)
}

// deviceBackends are the backends of --devices on --backend kind: on
// hostsim a simulated machine (gpuworker.ParseMachine: "8xh200", "2"), on
// another backend a count N, its ordinals 0 to N-1. run --devices and node
// both take it.
func deviceBackends(kind, devices string) ([]gpuworker.BackendFactory, error) {
	if kind == gpuworker.KindHostSim {
		mc, err := gpuworker.ParseMachine(devices)
		if err != nil {
			return nil, fmt.Errorf("--devices: %w", err)
		}
		m, err := gpuworker.NewHostSimMachine(mc)
		if err != nil {
			return nil, fmt.Errorf("--devices: %w", err)
		}
		return m.Factories(), nil
	}
	if !slices.Contains(gpuworker.Backends(), kind) {
		return nil, fmt.Errorf("--backend %q: %w", kind, &gpuworker.BackendNotBuiltInError{Name: kind, Available: gpuworker.Backends()})
	}
	n, err := strconv.Atoi(devices)
	if err != nil || n < 1 || n > gpuworker.MaxMachineDevices {
		return nil, fmt.Errorf("--devices %q: the %s backend takes a count of devices, 1 to %d", devices, kind, gpuworker.MaxMachineDevices)
	}
	fs := make([]gpuworker.BackendFactory, n)
	for i := range fs {
		fs[i] = gpuworker.BackendConfig{Kind: kind, Ordinal: i}.Factory()
	}
	return fs, nil
}

// groupPlans are the ranks' plans: arena.PlanRanks' with
// --tensor-parallel-size > 1, else plan on every rank.
func (c *runCmd) groupPlans(cfg *arena.ModelConfig, plan *arena.Plan, ranks int) ([]*arena.Plan, string, error) {
	plans := make([]*arena.Plan, ranks)
	if c.group.tensorParallel <= 1 {
		for r := range plans {
			plans[r] = plan
		}
		return plans, "the same plan on every rank", nil
	}
	if c.group.tensorParallel != int64(ranks) {
		return nil, "", fmt.Errorf("--tensor-parallel-size %d on %d devices: run builds one replica, so give as many devices", c.group.tensorParallel, ranks)
	}
	rps, err := arena.PlanRanks(cfg, c.plan.opts, arena.WeightOptions{}, arena.ParallelLayout{TensorParallelSize: c.group.tensorParallel})
	if err != nil {
		return nil, "", fmt.Errorf("--tensor-parallel-size: %w", err)
	}
	for r := range plans {
		plans[r] = rps[r].Plan
	}
	return plans, "arena.PlanRanks", nil
}

// runGroup is run --devices: it opens a group of one rank per device,
// builds every rank's arena, runs --steps group steps from --clients
// goroutines (each rank writes the step's token ids into its token_ids and
// reads them back), releases, closes, and checks per rank: one backend
// thread of its own, one forward at a time, the same steps in the same
// order, the arena's bytes, nothing left after the release.
func (c *runCmd) runGroup(cmd *cobra.Command, layout device.Layout) error {
	changed := cmd.Flags().Changed
	if c.model != "" || c.kv {
		return errors.New("--devices: runs the arena and forward steps; --model and --kv are for one device")
	}
	factories, err := c.groupBackends(changed)
	if err != nil {
		return err
	}
	cfg, plan, err := c.plan.plan(changed)
	if err != nil {
		return err
	}
	plans, source, err := c.groupPlans(cfg, plan, len(factories))
	if err != nil {
		return err
	}
	rep := &groupReport{ModelType: plan.ModelType, Config: c.plan.config, Backend: c.backend.kind, Devices: len(factories),
		TensorParallelSize: max(1, c.group.tensorParallel), PlanSource: source, GoroutinesBefore: runtime.NumGoroutine()}
	g, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(factories...),
		gpuarena.WithRankOptions(gpuarena.WithGPUMemoryUtilization(c.utilization), gpuarena.WithArenaLayout(layout), gpuarena.WithLogger(c.app.logger)))
	if err != nil {
		return err
	}
	rep.Spin = gpuarena.GroupSpin(len(factories), runtime.GOMAXPROCS(0)).String()
	rep.Ranks = make([]groupRankReport, len(factories))
	for r, d := range g.Devices() {
		rep.Ranks[r] = groupRankReport{Rank: r, Ordinal: d.Ordinal, Device: d.Name, TotalBytes: d.TotalBytes, BudgetBytes: g.Budgets()[r], PlanBytes: plans[r].TotalBytes}
	}
	exerciseErr := c.exerciseGroup(cmd.Context(), g, plans, rep)
	closeErr := g.Close()
	rep.GoroutinesAfter = settleGoroutines(rep.GoroutinesBefore)
	if err := errors.Join(exerciseErr, closeErr); err != nil {
		return err
	}
	rep.check(c.backend.kind == gpuworker.KindHostSim)
	if c.jsonOut {
		err = writeJSON(cmd.OutOrStdout(), rep)
	} else {
		writeGroupText(cmd.OutOrStdout(), rep)
	}
	if err != nil {
		return err
	}
	if len(rep.InvariantsFailed) > 0 {
		return negative(fmt.Errorf("invariant failed: %s", joinSemi(rep.InvariantsFailed)))
	}
	return nil
}

// exerciseGroup builds, steps and releases the group, filling rep.
func (c *runCmd) exerciseGroup(ctx context.Context, g *gpuarena.Group, plans []*arena.Plan, rep *groupReport) error {
	if ctx == nil {
		ctx = context.Background()
	}
	for r := range rep.Ranks {
		free, _, err := g.Rank(r).MemInfo(ctx)
		if err != nil {
			return err
		}
		rep.Ranks[r].DeviceFreeBefore = free
		if rep.Ranks[r].ExpectedArenaBytes, err = c.expectedBytes(plans[r]); err != nil {
			return err
		}
	}
	start := time.Now()
	if _, err := g.BuildArenas(ctx, plans); err != nil {
		return err
	}
	rep.BuildMS = ms(time.Since(start))
	ledgers, err := g.Ledgers(ctx)
	if err != nil {
		return err
	}
	for r, l := range ledgers {
		rep.Ranks[r].ArenaBytes = l.Counters.CurrentBytes
	}
	if err := c.groupSteps(ctx, g, rep); err != nil {
		return err
	}
	if _, err := g.Release(context.Background()); err != nil {
		return err
	}
	if ledgers, err = g.Ledgers(context.Background()); err != nil {
		return err
	}
	stats, err := g.Stats(context.Background())
	if err != nil {
		return err
	}
	for r := range rep.Ranks {
		rep.Ranks[r].LedgerBytesAfterRelease = ledgers[r].Counters.CurrentBytes
		rep.Ranks[r].BackendThreads = len(stats[r].ThreadIDs)
		if rep.Ranks[r].DeviceFreeAfter, _, err = g.Rank(r).MemInfo(context.Background()); err != nil {
			return err
		}
	}
	if threads := distinctThreads(stats); threads != len(stats) {
		rep.failed(fmt.Sprintf("the %d ranks ran on %d distinct threads, want one each", len(stats), threads))
	}
	return nil
}

// distinctThreads counts the distinct thread ids of every rank's stats.
func distinctThreads(stats []device.Stats) int {
	seen := map[int]bool{}
	for _, s := range stats {
		for _, t := range s.ThreadIDs {
			seen[t] = true
		}
	}
	return len(seen)
}

// groupSteps runs --steps group steps from --clients goroutines: on every
// rank each writes the step's number and the rank into token_ids and reads
// them back. Ranks record the steps they ran, in order, and how many of
// their forwards ran at once.
func (c *runCmd) groupSteps(ctx context.Context, g *gpuarena.Group, rep *groupReport) error {
	n := g.Ranks()
	order := make([][]int, n) // rank r's steps, appended on r's GPU thread only
	running := make([]atomic.Int64, n)
	peak := make([]atomic.Int64, n)
	var mismatches atomic.Int64
	lat := make([]time.Duration, 0, c.steps)
	var mu sync.Mutex
	var next atomic.Int64
	step := func(id int) gpuarena.GroupStep {
		return func(rank int, a *device.Arena, dev device.Device) error {
			now := running[rank].Add(1)
			defer running[rank].Add(-1)
			for p := peak[rank].Load(); now > p && !peak[rank].CompareAndSwap(p, now); p = peak[rank].Load() {
			}
			order[rank] = append(order[rank], id)
			var want [8]byte
			binary.LittleEndian.PutUint32(want[:4], uint32(id))
			binary.LittleEndian.PutUint32(want[4:], uint32(rank))
			p := a.Ptr(arena.TokenIDs)
			if err := dev.CopyHtoD(p, want[:]); err != nil {
				return err
			}
			got := make([]byte, len(want))
			if err := dev.CopyDtoH(got, p); err != nil {
				return err
			}
			if string(got) != string(want[:]) {
				mismatches.Add(1)
			}
			return nil
		}
	}
	errs := make([]error, c.clients)
	var wg sync.WaitGroup
	for cl := range c.clients {
		wg.Go(func() {
			for id := int(next.Add(1)) - 1; id < c.steps; id = int(next.Add(1)) - 1 {
				t0 := time.Now()
				if _, err := g.Forward(ctx, step(id)); err != nil {
					errs[cl] = err
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	rep.Steps = len(lat)
	if len(lat) > 0 {
		s := sortedDurations(lat)
		rep.StepP50US = float64(s[len(s)/2].Nanoseconds()) / 1e3
		rep.StepP99US = float64(s[len(s)*99/100].Nanoseconds()) / 1e3
	}
	for r := range n {
		rep.Ranks[r].Steps = len(order[r])
		rep.Ranks[r].MaxConcurrentForwards = peak[r].Load()
		if !slices.Equal(order[r], order[0]) {
			rep.failed(fmt.Sprintf("rank %d ran the group's steps in another order than rank 0", r))
		}
	}
	if m := mismatches.Load(); m > 0 {
		rep.failed(fmt.Sprintf("%d readbacks differed from what the step wrote", m))
	}
	return nil
}

// check records the invariants that failed: per rank one forward at a
// time, every step, one backend thread, the arena's bytes (hostsim: the
// device lost exactly them), nothing after the release; and no goroutine
// left.
func (r *groupReport) check(hostsim bool) {
	for _, k := range r.Ranks {
		switch {
		case k.MaxConcurrentForwards > 1:
			r.failed(fmt.Sprintf("rank %d: %d forwards at once", k.Rank, k.MaxConcurrentForwards))
		case k.Steps != r.Steps:
			r.failed(fmt.Sprintf("rank %d ran %d steps of %d", k.Rank, k.Steps, r.Steps))
		case k.BackendThreads != 1:
			r.failed(fmt.Sprintf("rank %d: backend_threads %d, want 1", k.Rank, k.BackendThreads))
		case k.ArenaBytes != k.ExpectedArenaBytes:
			r.failed(fmt.Sprintf("rank %d: arena_bytes %d, want %d", k.Rank, k.ArenaBytes, k.ExpectedArenaBytes))
		case k.LedgerBytesAfterRelease != 0:
			r.failed(fmt.Sprintf("rank %d: ledger_bytes_after_release %d", k.Rank, k.LedgerBytesAfterRelease))
		case hostsim && k.DeviceFreeAfter != k.DeviceFreeBefore:
			r.failed(fmt.Sprintf("rank %d: device_free_after %d, want device_free_before %d", k.Rank, k.DeviceFreeAfter, k.DeviceFreeBefore))
		}
	}
	if r.GoroutinesAfter > r.GoroutinesBefore {
		r.failed(fmt.Sprintf("goroutines_after %d > goroutines_before %d", r.GoroutinesAfter, r.GoroutinesBefore))
	}
}

// writeGroupText prints the report as a summary and a table of the ranks.
func writeGroupText(w io.Writer, r *groupReport) {
	fmt.Fprintf(w, "%s on %d %s devices (tensor_parallel_size %d: %s; spin %s)\n", r.ModelType, r.Devices, r.Backend, r.TensorParallelSize, r.PlanSource, r.Spin)
	fmt.Fprintf(w, "build %.1f ms; %d group steps, p50 %.1f µs, p99 %.1f µs\n", r.BuildMS, r.Steps, r.StepP50US, r.StepP99US)
	t := newTable(w)
	fmt.Fprintln(t, "rank\tordinal\tdevice\ttotal\tbudget\tarena\tsteps\tthreads\tafter release")
	for _, k := range r.Ranks {
		fmt.Fprintf(t, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d B\n", k.Rank, k.Ordinal, k.Device, arena.HumanBytes(k.TotalBytes),
			arena.HumanBytes(k.BudgetBytes), arena.HumanBytes(k.ArenaBytes), k.Steps, k.BackendThreads, k.LedgerBytesAfterRelease)
	}
	_ = t.Flush()
	if len(r.InvariantsFailed) == 0 {
		fmt.Fprintln(w, "invariants: all hold")
	}
}
