package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// defaultRunConfig is run's --config default, relative to the working
// directory, so "go run ./examples/arenactl run" works from the repo root.
const defaultRunConfig = "examples/configs/qwen3-next-80b-a3b-thinking.json"

const runLong = `Run builds the arena on a device, runs --steps forward steps submitted by
--clients goroutines, carves the slabs (when the plan has any), releases
everything and closes the manager, then checks the invariants:

  - max_concurrent_forwards is 1 (forward steps never overlap)
  - backend_threads is 1 (every backend call ran on one OS thread)
  - ledger_bytes_after_release is 0, and the arena held exactly the plan's
    bytes (pooled: the pool's size, which adds alignment padding, plus the slabs)
  - goroutines_after ≤ goroutines_before (Close left nothing running)
  - every step's readback matched what it wrote
  - hostsim only: device free memory is back to where it was

Each step writes token ids host→device into token_ids, copies hidden_states
to residual device→device, reads both back and compares them with what was
written (hidden_states is seeded once with a known pattern before the steps).

With --model DIR (a folder holding config.json and its safetensors
checkpoint; --config defaults to it) the weights are loaded onto the device
first (Manager.LoadWeights), after Manager.Preflight of the weights and the
arena; every step also reads a 4 KiB window of one weight tensor back and
compares it with the file, the report adds weights_bytes,
weights_allocated_bytes, weights_load_ms and weights_load_gbps, and the
device must lose exactly arena_bytes + weights_allocated_bytes to the load
and build (hostsim) and get them back after the release.

The load's progress goes to stderr, never into --json's stdout: on a
terminal a progress bar (bytes done of total, rate, time left, the tensor
being copied); otherwise plain lines, one each time another 10% of the
bytes is on the device, the last at 100%:

  weights:  10%  1677721600 of 16060522496 B  12.34 GB/s  model.layers.3.mlp.up_proj.weight

--json prints {"arena_bytes", "build_ms", "steps", "max_concurrent_forwards",
"backend_threads", "ledger_bytes_after_release", "goroutines_before",
"goroutines_after", "device_free_before", "device_free_built",
"device_free_after"} followed by extra keys (model_type, backend, device,
step latencies, …, invariants_failed).

Exit status: 0 when every invariant holds, 1 when one fails (named on
stderr), 2 on an error.`

// runCmd holds the flags of "arenactl run".
type runCmd struct {
	app         *app
	plan        planFlags
	backend     backendFlags
	steps       int
	clients     int
	utilization float64
	layout      string
	ledgerOut   string
	jsonOut     bool
	model       string    // --model: a model folder whose weights are loaded first
	stderr      io.Writer // the command's stderr: the weights load's progress
}

// newRunCmd builds "arenactl run".
func newRunCmd(a *app) *cobra.Command {
	c := &runCmd{app: a}
	cmd := &cobra.Command{
		Use:   "run [flags]",
		Short: "Build the arena on a device, run forward steps, release, and check the invariants",
		Long:  runLong,
		Args:  cobra.NoArgs,
		RunE:  c.run,
	}
	fs := cmd.Flags()
	c.plan.register(fs, defaultRunConfig)
	c.backend.register(fs, true)
	addUtilizationFlag(fs, &c.utilization)
	fs.IntVar(&c.steps, "steps", 100, "forward steps to run")
	fs.StringVar(&c.layout, "layout", string(device.LayoutPooled),
		"arena layout: pooled (one allocation, buffers at 256-byte-aligned offsets) or discrete (one allocation per buffer)")
	fs.IntVar(&c.clients, "clients", 8, "goroutines submitting the steps (the steps are divided among them)")
	fs.StringVar(&c.ledgerOut, "ledger-out", "", "write the ledger snapshot taken after the build (every allocation: label, owner, bytes, pointer, age; and the counters) to this file as JSON")
	fs.BoolVar(&c.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&c.model, "model", "", "model folder (config.json and its safetensors checkpoint): load the weights before the build, check a window of one in every step, and report weights_bytes, weights_load_ms and weights_load_gbps; --config defaults to the folder")
	return cmd
}

// run builds, exercises and tears down an arena, then reports and checks
// the invariants.
func (c *runCmd) run(cmd *cobra.Command, _ []string) error {
	c.stderr = cmd.ErrOrStderr()
	if c.steps < 0 {
		return fmt.Errorf("--steps %d: must not be negative", c.steps)
	}
	if c.clients < 1 {
		return fmt.Errorf("--clients %d: must be at least 1", c.clients)
	}
	layout := device.Layout(c.layout)
	if layout != device.LayoutPooled && layout != device.LayoutDiscrete {
		return fmt.Errorf("--layout %q: want %s or %s", c.layout, device.LayoutPooled, device.LayoutDiscrete)
	}
	bc, err := c.backend.config(c.backend.ordinal, cmd.Flags().Changed)
	if err != nil {
		return err
	}
	if c.model != "" && !cmd.Flags().Changed("config") {
		c.plan.config = c.model
	}
	cfg, plan, err := c.plan.plan(cmd.Flags().Changed)
	if err != nil {
		return err
	}
	rep := &runReport{ModelType: plan.ModelType, Config: c.plan.config, Layout: c.layout, Clients: c.clients, Slabs: len(plan.Slabs)}
	log := c.app.logger

	rep.GoroutinesBefore = runtime.NumGoroutine()
	m, err := gpuarena.New(gpuarena.WithBackend(bc), gpuarena.WithGPUMemoryUtilization(c.utilization),
		gpuarena.WithArenaLayout(layout), gpuarena.WithLogger(log))
	if err != nil {
		// The layout is checked above and the backend and logger are set, so
		// an invalid option can only be the utilization.
		if errors.Is(err, gpuarena.ErrInvalidOption) {
			err = fmt.Errorf("--gpu-memory-utilization: %w", err)
		}
		return err
	}
	info := m.Device()
	rep.Backend, rep.Device, rep.DeviceTotalBytes, rep.BudgetBytes = info.Backend, info.Name, info.TotalBytes, m.Budget()

	exerciseErr := c.exercise(cmd.Context(), m, cfg, plan, rep)
	teardownErr := teardown(m, rep)
	rep.GoroutinesAfter = settleGoroutines(rep.GoroutinesBefore)
	if err := errors.Join(exerciseErr, teardownErr); err != nil {
		log.Warn("run: state at failure", "report", rep)
		return err
	}
	rep.checkInvariants(bc.Kind == gpuworker.KindHostSim)
	if c.jsonOut {
		err = writeJSON(cmd.OutOrStdout(), rep)
	} else {
		writeRunText(cmd.OutOrStdout(), rep)
	}
	if err != nil {
		return err
	}
	if len(rep.InvariantsFailed) > 0 {
		return negative(fmt.Errorf("invariant failed: %s", joinSemi(rep.InvariantsFailed)))
	}
	return nil
}

// exercise measures the device, builds the arena, runs the steps and carves
// the slabs, filling rep. An error is one that stopped the run; a failed
// check is recorded in rep instead.
func (c *runCmd) exercise(ctx context.Context, m *gpuarena.Manager, cfg *arena.ModelConfig, plan *arena.Plan, rep *runReport) error {
	log := c.app.logger
	free, total, err := m.MemInfo(ctx)
	if err != nil {
		return err
	}
	rep.DeviceFreeBefore = free
	fit := func() (*arena.FitReport, error) {
		if c.model != "" {
			return m.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(c.model, device.LayoutPooled))
		}
		return arena.Fit(plan, cfg, arena.DeviceMemory{TotalBytes: total, FreeBytes: free},
			// run builds only the arena, in a process whose context already exists.
			arena.FitOptions{GPUMemoryUtilization: &c.utilization, ExcludeWeights: true, ReserveBytes: new(int64(0))})
	}
	if r, err := fit(); err != nil {
		log.Warn("run: preflight fit failed", "err", err)
	} else {
		rep.Fits, rep.KVBlocks = r.Fits, r.KVBlocks
		log.Info("run: preflight fit", "report", r)
		if !r.Fits {
			log.Warn("run: the plan does not fit with the KV cache of one sequence; building the arena anyway", "shortfall_bytes", r.ShortfallBytes)
		}
	}

	var probe *weightProbe
	if c.model != "" {
		if probe, err = loadModel(ctx, m, c.model, c.stderr, rep); err != nil {
			return err
		}
		defer probe.close()
	}
	start := time.Now()
	a, err := m.BuildArena(ctx, plan)
	rep.BuildMS = ms(time.Since(start))
	if err != nil {
		return err
	}
	if rep.ExpectedArenaBytes, err = c.expectedBytes(plan); err != nil {
		return err
	}
	led, err := m.Ledger(ctx)
	if err != nil {
		return err
	}
	rep.ArenaBytes = led.Counters.CurrentBytes - rep.WeightsAllocatedBytes
	if c.ledgerOut != "" {
		if err := writeJSONFile(c.ledgerOut, led); err != nil {
			return fmt.Errorf("--ledger-out: %w", err)
		}
	}
	if rep.DeviceFreeBuilt, _, err = m.MemInfo(ctx); err != nil {
		return err
	}
	log.Info("run: arena built", "bytes", rep.ArenaBytes, "build_ms", rep.BuildMS)

	w, err := newWorkload(a)
	if err != nil {
		return err
	}
	w.probe = probe
	if err := w.seed(ctx, m); err != nil {
		return err
	}
	if err := w.run(ctx, m, c.steps, c.clients, rep); err != nil {
		return err
	}
	carves, err := carveSlabs(ctx, m, plan)
	rep.SlabCarves = carves
	var ce *checkError
	if errors.As(err, &ce) {
		rep.failed("slab carve: " + ce.Error())
		return nil
	}
	return err
}

// expectedBytes is what building plan should hold on the device, computed
// from arena alone: the pool's size (arena.NewPoolLayout, with its alignment
// padding) or the buffers' sum, plus the slabs.
func (c *runCmd) expectedBytes(plan *arena.Plan) (int64, error) {
	if device.Layout(c.layout) == device.LayoutDiscrete {
		return plan.BufferBytes + plan.SlabBytes, nil
	}
	pool, err := arena.NewPoolLayout(plan)
	if err != nil {
		return 0, err
	}
	return pool.Bytes + plan.SlabBytes, nil
}

// teardown releases the arena, reads the ledger, the worker's stats and the
// device's free memory, and closes the manager. It runs even when the run
// stopped early (and after an interrupt: it does not use the command's
// context), so nothing is left on the device.
func teardown(m *gpuarena.Manager, rep *runReport) error {
	ctx := context.Background()
	var errs []error
	start := time.Now()
	rel, err := m.Release(ctx)
	rep.ReleaseMS = ms(time.Since(start))
	rep.ReleasedAllocations = rel.Freed
	errs = append(errs, err)
	if led, err := m.Ledger(ctx); err == nil {
		rep.LedgerBytesAfterRelease, rep.LedgerPeakBytes = led.Counters.CurrentBytes, led.Counters.PeakBytes
	} else {
		errs = append(errs, err)
	}
	if st, err := m.Stats(ctx); err == nil {
		rep.BackendThreads = len(st.ThreadIDs)
	} else {
		errs = append(errs, err)
	}
	var free int64
	free, _, err = m.MemInfo(ctx)
	rep.DeviceFreeAfter = free
	errs = append(errs, err, m.Close())
	return errors.Join(errs...)
}

// settleGoroutines waits up to a second for the goroutine count to come back
// to baseline (goroutines that Close stopped may take a moment to be
// counted out) and returns the last count.
func settleGoroutines(baseline int) int {
	deadline := time.Now().Add(time.Second)
	n := runtime.NumGoroutine()
	for n > baseline && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
