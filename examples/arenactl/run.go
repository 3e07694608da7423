package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/examples/internal/serving"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/modelgen"
)

const runLong = `Run puts a model on a device end to end and checks the invariants.

With neither --config nor --model it does the whole job: it generates a
checkpoint of Qwen3-0.6B (examples/configs/qwen3-0.6b.json, built into
arenactl; 1.19 GB of deterministic random BF16 weights under the real
tensor names) in a temporary folder, loads it, builds the arena and the KV
cache the fit leaves room for, serves a generated trace of requests
through the cache, releases everything, deletes the folder, and checks:
  - max_concurrent_forwards is 1 (forward steps never overlap; a real test
    only without --kv, where --clients goroutines submit steps at once:
    with --kv one scheduler goroutine submits them, one after another)
  - backend_threads is 1 (every backend call ran on one OS thread)
  - ledger_bytes_after_release is 0, and the arena held exactly the plan's
    bytes (pooled: the pool's size, which adds alignment padding, plus the slabs)
  - goroutines_after ≤ goroutines_before (Close left nothing running)
  - every step's readback matched what it wrote
  - with the KV cache: the device lost exactly kv_cache_bytes to it
    (hostsim), every request finished, and after every step the block
    pool's invariants held (no block held twice unless shared, reference
    counts equal references, free + cached + used = total)
  - device free memory is back to where it was: on hostsim right after
    the release; on a real device after Close, as a fresh context reads it
    before and after the run (device_free_baseline, device_free_closed: the
    driver keeps per-context launch resources until the context goes)
--kv serves a trace (--trace FILE replays a JSON one; otherwise --requests
requests are generated: prompts of 256 to 1,024 tokens, half of them
starting with one of 4 shared 256-token prefixes, 8 to 128 output tokens,
4 arriving per step). A continuous-batching scheduler admits requests while
max_batch_size, max_batch_tokens and the free blocks allow, appends one
token per running sequence each step, frees finished ones, and preempts the
newest when the pool is exhausted; every scheduler step is one round trip
to the manager's KV supervisor (Manager.KVStep), and each forward step
copies the batch's block tables into the arena's scratch buffer and reads
them back. --kv-blocks builds fewer blocks than the fit allows (to see
preemption). The report adds kv_cache_bytes, kv_blocks, kv_peak_used_blocks,
prefix_queries, prefix_hits, prefix_hit_tokens, preemptions, requests and
sequences_finished.
Without --kv (with --config or --model), each of --steps fixed steps from
--clients goroutines writes token ids host→device into token_ids, copies
hidden_states to residual device→device, reads both back and compares them
with what was written (hidden_states is seeded once with a known pattern).
With --model DIR (a folder holding config.json and its safetensors
checkpoint; --config defaults to it) the weights are loaded onto the device
first (Manager.LoadWeights), after Manager.Preflight of the weights and the
arena; every step also reads a 4 KiB window of one weight tensor back and
compares it with the file, the report adds weights_bytes,
weights_allocated_bytes, weights_load_ms and weights_load_gbps, and the
device must lose exactly arena_bytes + weights_allocated_bytes to the load
and build (hostsim) and get them back after the release. Each step then
also launches gpuarena's kernels (package kernels): RMSNorm of 4 rows of
known activations in hidden_states with layer 0's input_layernorm weight
(as an offset from 1 for qwen3_next and gemma*) and the config's
rms_norm_eps into norm_output, and residual = hidden_states + norm_output,
checked against the Go references within their BF16 tolerance; the report
adds the kernels' GPU time per step from events (step_gpu_p50_us,
step_gpu_p99_us), their wall time per step (step_kernels_wall_p50_us) and
compute_max_ulps. With --cuda-graphs the kernels are captured once as a
CUDA graph and odd steps replay it (Device.LaunchGraph) where even steps
launch them one by one, on the same rows; the report adds the replays'
graph_step_gpu_p50_us and graph_step_kernels_wall_p50_us beside them.
The load's progress goes to stderr, never into --json's stdout: on a
terminal a progress bar (bytes done of total, rate, time left, the tensor
being copied); otherwise plain lines, one each time another 10% of the
bytes is on the device, the last at 100%:
  weights:  10%  1677721600 of 16060522496 B  12.34 GB/s  model.layers.3.mlp.up_proj.weight
Before the build, run fits twice on the device as it finds it: arena_fits
says whether what run builds fits (the arena and one max_seq_len sequence's
KV cache, the weights and the reserve left out); model_fits whether the
whole model would (the weights too: the checkpoint's with --model, through
Manager.Preflight; otherwise the estimate from config.json and the default
1 GiB reserve, as "arenactl fit" counts them). With --config and no
--model, run builds only the arena (and with --kv the KV cache the arena's
fit leaves room for): it runs even for a model whose weights do not fit,
such as Qwen3-Next-80B's 159 GB of BF16 weights on one H200, and says so.

--json prints {"arena_bytes", "build_ms", "steps", "max_concurrent_forwards",
"backend_threads", "ledger_bytes_after_release", "goroutines_before",
"goroutines_after", "device_free_before", "device_free_built",
"device_free_after"} followed by extra keys (model_type, backend, device,
arena_fits, model_fits, model_weight_bytes, model_weight_source,
model_shortfall_bytes, model_kv_blocks, step latencies, …,
invariants_failed).

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
	kv          bool      // --kv: build the KV cache and serve a trace instead of fixed steps
	kvBlocks    int64     // --kv-blocks: paged blocks to build, fewer than the fit's
	trace       string    // --trace: a JSON serving trace to replay
	requests    int       // --requests: the generated trace's requests
	cudaGraphs  bool      // --cuda-graphs: odd steps replay the kernels as a captured CUDA graph
	// kvFit is the fit the KV cache is sized from: the model's (with the
	// checkpoint) with --model, else the arena's (weights left out).
	kvFit *arena.FitReport
	group groupFlags // --devices, --tensor-parallel-size, --rank: run_group.go
	// rank is --rank's rank of a layout, nil without it (run_rank.go).
	rank *rankRun
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
	useBuiltinConfig(fs, &c.plan)
	c.backend.register(fs, true)
	c.group.register(fs)
	addUtilizationFlag(fs, &c.utilization)
	fs.IntVar(&c.steps, "steps", 100, "forward steps to run")
	fs.StringVar(&c.layout, "layout", string(device.LayoutPooled),
		"arena layout: pooled (one allocation, buffers at 256-byte-aligned offsets) or discrete (one allocation per buffer)")
	fs.IntVar(&c.clients, "clients", 8, "goroutines submitting the steps (the steps are divided among them)")
	fs.StringVar(&c.ledgerOut, "ledger-out", "", "write the ledger snapshot taken after the build (every allocation: label, owner, bytes, pointer, age; and the counters) to this file as JSON")
	fs.BoolVar(&c.jsonOut, "json", false, "print the report as JSON")
	fs.BoolVar(&c.kv, "kv", false, "after the arena (and the weights), build the KV cache the fit leaves room for and serve a trace through it instead of --steps fixed steps (on whenever neither --config nor --model is given)")
	fs.Int64Var(&c.kvBlocks, "kv-blocks", 0, "with --kv: build this many paged KV blocks instead of all the fit allows (0: all)")
	fs.StringVar(&c.trace, "trace", "", "with --kv: replay this JSON serving trace ({\"requests\": [{\"id\", \"arrival_step\", \"prompt_tokens\", \"output_tokens\", \"prefix\", \"prefix_tokens\"}]}) instead of a generated one")
	fs.IntVar(&c.requests, "requests", 96, "with --kv and no --trace: the generated trace's requests")
	fs.BoolVar(&c.cudaGraphs, "cuda-graphs", false, "with --model: capture each step's kernels once as a CUDA graph (Manager.CaptureGraph); even steps launch them one by one, odd steps replay the graph, and the report puts the GPU and kernels' wall times per step of both side by side")
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
	if c.model == "" && !cmd.Flags().Changed("config") {
		path, remove, err := resolveConfig(builtinRunConfigName)
		if err != nil {
			return err
		}
		defer remove()
		c.plan.config = path
	}
	if c.group.devices != "" {
		if cmd.Flags().Changed("rank") {
			return errors.New("--rank builds one rank on one device: leave out --devices")
		}
		return c.runGroup(cmd, layout)
	}
	bc, err := c.backend.config(c.backend.ordinal, cmd.Flags().Changed)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("rank") {
		c.kv = true // the rank's whole share: its KV cache too (run_rank.go)
	}
	switch {
	case c.kvBlocks < 0 || c.kvBlocks == 1:
		return fmt.Errorf("--kv-blocks %d: must be 0 (all the fit allows) or at least 2 (the pool keeps block 0 back)", c.kvBlocks)
	case c.requests < 1:
		return fmt.Errorf("--requests %d: must be at least 1", c.requests)
	case !c.kv && (c.model != "" || cmd.Flags().Changed("config")): // the default run serves
		for _, f := range []string{"kv-blocks", "trace", "requests"} {
			if cmd.Flags().Changed(f) {
				return fmt.Errorf("--%s serves a trace through the KV cache: add --kv", f)
			}
		}
	}
	if c.trace != "" { // read now, not after the model is generated and loaded
		if _, err := serving.Load(c.trace); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
	}
	if c.model == "" && !cmd.Flags().Changed("config") {
		dir, err := os.MkdirTemp("", "arenactl-model-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		gen, err := modelgen.GenerateContext(cmd.Context(), c.plan.config, dir, modelgen.Options{Seed: 1})
		if err != nil {
			return fmt.Errorf("generate the default model: %w", err)
		}
		c.app.logger.Info("run: generated a checkpoint of the default model", "config", c.plan.config, "dir", dir, "bytes", gen.Manifest.TotalBytes)
		c.model, c.kv = dir, true
	}
	if c.model != "" && !cmd.Flags().Changed("config") {
		c.plan.config = c.model
	}
	cfg, plan, err := c.plan.plan(cmd.Flags().Changed)
	if err != nil {
		return err
	}
	if c.model != "" && c.plan.config != c.model {
		if err := checkModelMatches(cfg, c.plan.config, c.model); err != nil {
			return err
		}
	}
	if c.rank, err = c.rankSetup(cfg, cmd.Flags().Changed); err != nil {
		return err
	}
	if c.rank != nil { // from here on, the rank's share is the model
		cfg, plan = c.rank.plan.Config, c.rank.plan.Plan
	}
	rep := &runReport{ModelType: plan.ModelType, Config: c.plan.config, Layout: c.layout, Clients: c.clients, Slabs: len(plan.Slabs), Served: c.kv}
	rep.ComputeCUDAGraphs = c.cudaGraphs // run_compute.go reads it
	log := c.app.logger

	rep.GoroutinesBefore = runtime.NumGoroutine()
	real := bc.Kind != gpuworker.KindHostSim
	if real {
		if rep.DeviceFreeBaseline, err = freshFree(bc, log); err != nil {
			return err
		}
	}
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
	if real && teardownErr == nil {
		rep.DeviceFreeClosed, teardownErr = freshFree(bc, log)
	}
	rep.GoroutinesAfter = settleGoroutines(rep.GoroutinesBefore)
	if err := errors.Join(exerciseErr, teardownErr); err != nil {
		log.Info("run: state at failure", "report", rep)
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
	c.preflight(ctx, m, cfg, plan, arena.DeviceMemory{TotalBytes: total, FreeBytes: free}, rep)

	var probe *weightProbe
	switch {
	case c.model != "" && c.rank != nil:
		probe, err = c.loadRank(ctx, m, c.stderr, rep)
	case c.model != "":
		probe, err = loadModel(ctx, wholeModel(m, c.model), c.model, c.stderr, rep)
	}
	if err != nil {
		return err
	}
	if probe != nil {
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

	if c.kv {
		if err := c.serve(ctx, m, cfg, plan, a, probe, rep); err != nil {
			return err
		}
		if err := c.checkRank(ctx, m, rep, rep.Backend == gpuworker.KindHostSim); err != nil {
			return err
		}
		return c.carve(ctx, m, plan, rep)
	}
	w, err := newWorkload(a)
	if err != nil {
		return err
	}
	w.probe = probe
	if probe != nil { // run_compute.go: the steps also launch kernels
		if probe.compute, err = newStepCompute(ctx, m, c.model, cfg, a, probe, rep); err != nil {
			return err
		}
	}
	if err := w.seed(ctx, m); err != nil {
		return err
	}
	if err := w.run(ctx, m, c.steps, c.clients, rep); err != nil {
		return err
	}
	if err := probe.finishCompute(); err != nil {
		return err
	}
	return c.carve(ctx, m, plan, rep)
}

// carve carves the plan's slabs and records them in rep; a failed check is
// recorded, not returned.
func (c *runCmd) carve(ctx context.Context, m *gpuarena.Manager, plan *arena.Plan, rep *runReport) error {
	carves, err := carveSlabs(ctx, m, plan)
	rep.SlabCarves = carves
	var ce *checkError
	if errors.As(err, &ce) {
		rep.failed("slab carve: " + ce.Error())
		return nil
	}
	return err
}

// preflight fits the arena alone and the whole model on dev, the device
// as run finds it, and records both verdicts in rep (see runLong). A fit
// that fails is logged; run goes on and builds the arena either way.
func (c *runCmd) preflight(ctx context.Context, m *gpuarena.Manager, cfg *arena.ModelConfig, plan *arena.Plan, dev arena.DeviceMemory, rep *runReport) {
	if c.rank != nil {
		c.rankPreflight(dev, rep)
		return
	}
	log := c.app.logger
	// run builds only the arena, in a process whose context already exists.
	af, err := arena.Fit(plan, cfg, dev, arena.FitOptions{GPUMemoryUtilization: &c.utilization, ExcludeWeights: true, ReserveBytes: new(int64(0))})
	if err != nil {
		log.Warn("run: preflight fit of the arena failed", "err", err)
	} else {
		rep.ArenaFits = af.Fits
		c.kvFit = af
		log.Info("run: preflight fit of the arena", "report", af)
	}
	var mf *arena.FitReport
	if c.model != "" {
		mf, err = m.Preflight(ctx, plan, cfg, gpuarena.PreflightWeights(c.model, device.LayoutPooled))
	} else {
		mf, err = arena.Fit(plan, cfg, dev, arena.FitOptions{GPUMemoryUtilization: &c.utilization})
	}
	if err != nil {
		log.Warn("run: preflight fit of the model failed", "err", err)
		return
	}
	if c.model != "" {
		c.kvFit = mf // the weights are loaded: the KV cache gets what they leave
	}
	rep.ModelFits, rep.ModelKVBlocks, rep.ModelShortfallBytes = mf.Fits, mf.KVBlocks, mf.ShortfallBytes
	rep.ModelWeightBytes, rep.ModelWeightSource = mf.WeightBytes, mf.WeightSource
	log.Info("run: preflight fit of the model", "report", mf)
	switch {
	case !rep.ArenaFits:
		log.Warn("run: the arena does not fit with the KV cache of one sequence; building it anyway")
	case !mf.Fits && c.model == "":
		log.Info("run: the model with its weights does not fit; run builds only the arena", "model_shortfall_bytes", mf.ShortfallBytes)
	}
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
	if !errors.Is(err, gpuarena.ErrNoArena) { // a run stopped before its build: the rest was freed all the same
		errs = append(errs, err)
	}
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

// freshFree is the device's free memory as a manager of its own sees it
// right after it opens the device: on a real device its context's own
// memory is in it, as it was in the run's manager, so two readings, one
// before the run and one after its Close, compare what the run left behind
// — the driver's per-context memory (launch resources that appear with
// the first kernel) included, which goes with the context at Close.
func freshFree(bc gpuworker.BackendConfig, log *slog.Logger) (int64, error) {
	m, err := gpuarena.New(gpuarena.WithBackend(bc), gpuarena.WithLogger(log))
	if err != nil {
		return 0, err
	}
	free, _, err := m.MemInfo(context.Background())
	return free, errors.Join(err, m.Close())
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
