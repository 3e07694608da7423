package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/gpuworker"
)

const fitLong = `Fit checks, without touching a device, whether the model fits on a device of
--device-memory (or a --device preset's) bytes of which --device-used are
already held by other processes, under --gpu-memory-utilization
(design.md §6):

  budget          = ⌊gpu_memory_utilization × device memory⌋
  process budget  = budget − used by others (what the GPU worker allows)
  committed       = weights + arena + slabs + reserve
  kv budget       = process budget − committed
  fits            = one sequence of max_seq_len (its KV blocks, sliding-window
                    blocks and recurrent state) fits in the kv budget

That is --utilization-scope device, the default: the utilization caps every
process on the device together. vLLM's rule is --utilization-scope
instance: the budget is ⌈gpu_memory_utilization × device memory⌉ for this
process alone, whatever others hold, and it refuses to start unless that
much is free.

--device-memory takes a size with its unit: 80GB is 80×10^9 bytes, 80GiB
80×2^30 bytes, 85899345920B bytes; a bare number is refused. --device
h100-80gb, h200, a100-40gb, a100-80gb, l4, rtx-4090, rtx-3090 or dgx-spark
takes the total memory those cards' drivers report (less than the data
sheet's figure). The report gives the device memory in bytes.

--model DIR takes a model folder (config.json and its safetensors files, as
vLLM and Hugging Face take it): the weights then count as the exact bytes
the checkpoint's headers state (no tensor data is read) plus the padding
of the pooled allocation the loader makes (each tensor at a 256-byte-aligned
offset), each on its own line, with the estimate from config.json beside
them. After "run --model" loads that checkpoint (pooled) and builds the
arena, the ledger holds exactly tensors + pool padding for the "weights"
owner and the arena line for "arena". --config may then be left
out (it defaults to DIR).

Unset, --gpu-memory-utilization is 0.9 and --reserve 1 GiB (576 MiB with
--cuda-graphs after_kv_cache or estimated, which size the graphs the 1 GiB
allows for); --reserve 0 reserves nothing, and --gpu-memory-utilization 0
is refused.

--cuda-graphs sizes the CUDA graphs vLLM captures (vLLM's capture sizes:
1, 2, 4, every 8 below 256 and every 16 up to min(2 × max_batch_size ×
(1 + k_max), 512), 1024 for gpt-oss, at most max_batch_tokens; one forward's
activations at the largest size plus a per-graph cost vLLM 0.19 measured):
none (the default, and vLLM's --enforce-eager: the reserve covers them),
after_kv_cache (vLLM before 0.21: captured after the KV cache fills the
budget, so they must fit outside it) or estimated (vLLM 0.21 onwards: taken
out of the KV cache).

The report gives the breakdown, the KV-cache blocks and the sequences of
max_seq_len that fit at once. When it does not fit: by how much, the three
largest items, and the smallest single change that makes it fit (a lower
max_batch_tokens, a lower max_seq_len that stays within the model's limit,
a higher gpu_memory_utilization, or --logits-rows sampled). The notes say
when logits are a quarter of the arena or more and what --logits-rows
sampled would save.

--tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size and
--enable-expert-parallel (vLLM's flags) fit every rank of that layout, each
on a device like the one given: heads, MLP widths and the padded vocabulary
split over t ranks, layers over p stages as vLLM's get_pp_indices splits
them, routed experts over the t·d ranks with expert parallelism. The report
has a row per rank; the KV cache is the fewest blocks any rank holds. When
it does not fit, the suggestions may include a larger
--tensor-parallel-size. "arenactl place" lists the layouts that fit.

--svg FILE also writes the device's memory as the fit leaves it (weights,
arena and slabs, KV cache, reserve, other processes, free; the process
budget marked), drawn to scale as the server's /debug/memory draws it,
and the arena's buffers, as a standalone SVG file; one bar per rank for a
parallel layout.

Exit status: 0 when it fits, 1 when it does not, 2 on an error.`

// fitCmd holds the flags of "arenactl fit".
type fitCmd struct {
	app         *app
	plan        planFlags
	model       string
	utilization float64
	scope       string
	device      deviceMemoryFlags
	used        byteSize
	reserve     byteSize
	sampler     string // --sampler-warmup
	graphs      string // --cuda-graphs
	weightDType string
	layout      string // --weights-layout
	mxfp4       string // --mxfp4-backend
	includeMTP  bool
	noWeights   bool
	jsonOut     bool
	svg         string
	parallel    parallelFlags
}

// newFitCmd builds "arenactl fit".
func newFitCmd(a *app) *cobra.Command {
	c := &fitCmd{app: a}
	cmd := &cobra.Command{
		Use:   "fit (--config FILE | --model DIR) [flags]",
		Short: "Check whether the model fits on a device (exit 1 when it does not)",
		Long:  fitLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return c.run(cmd.OutOrStdout(), cmd.Flags().Changed) },
	}
	fs := cmd.Flags()
	c.plan.register(fs, "")
	fs.Lookup("config").Usage = "Hugging Face config.json of the model, or the model folder that holds it (required unless --model is given; default: --model's folder)"
	fs.StringVar(&c.model, "model", "", "model folder with config.json and the safetensors checkpoint: the fit counts the checkpoint's exact bytes (one GPU only)")
	c.device.register(fs, "the device's total memory")
	fs.Var(&c.used, "device-used", "memory already used by other processes: bytes or a size")
	c.registerBudget(fs)
	c.parallel.register(fs)
	fs.BoolVar(&c.jsonOut, "json", false, "print the fit as JSON")
	fs.StringVar(&c.svg, "svg", "", "also write the device's memory as the fit leaves it, drawn to scale, as a standalone SVG file (the picture of the server's /debug/memory)")
	return cmd
}

// registerBudget adds the flags that price the model against a device's
// budget, which fit and place share: utilization, its scope, the reserve
// and how the weights are sized.
func (c *fitCmd) registerBudget(fs *pflag.FlagSet) {
	addUtilizationFlag(fs, &c.utilization)
	fs.StringVar(&c.scope, "utilization-scope", string(arena.UtilizationDevice),
		"what --gpu-memory-utilization caps: device (every process together; others' memory comes out of the budget) or instance (this process alone, vLLM's rule)")
	c.reserve = byteSize(arena.DefaultReserveBytes) // shown as the default; passed to arena only when given
	fs.Var(&c.reserve, "reserve", "held back for the CUDA context, library workspaces and CUDA graphs: bytes or a size (0: none; unset with --cuda-graphs after_kv_cache or estimated: 576MiB, the graphs being sized apart)")
	fs.StringVar(&c.sampler, "sampler-warmup", string(arena.SamplerWarmupNone),
		"vLLM's start-up sampler pass over [max_batch_size, vocab] and the reserve outside its budget: none (gpuarena's engine), profiled (vLLM ≤ 0.16: sorted top-k/top-p, 38 B per element, inside the budget) or after_kv_cache (vLLM ≥ 0.17: 14 B per element, its warm-up also outside the budget)")
	fs.StringVar(&c.graphs, "cuda-graphs", string(arena.CUDAGraphsNone),
		"vLLM's CUDA graphs: none (the reserve covers them; vLLM's --enforce-eager), after_kv_cache (vLLM < 0.21: captured after the KV cache is sized, outside the budget) or estimated (vLLM ≥ 0.21: taken out of the KV cache)")
	fs.StringVar(&c.weightDType, "weight-dtype", "", "size the weights as bf16, f32 or fp8 instead of the config's torch_dtype and quantization")
	fs.StringVar(&c.layout, "weights-layout", "engine", "size the weights as vLLM holds them (engine: MXFP4 experts padded to the backend's tiles) or as the checkpoint stores them (checkpoint: what gpuarena's LoadWeights uploads)")
	fs.StringVar(&c.mxfp4, "mxfp4-backend", "marlin", "vLLM's MXFP4 MoE backend whose padding the engine layout uses: marlin, flashinfer_trtllm, flashinfer_cutlass or triton")
	fs.BoolVar(&c.includeMTP, "include-mtp", false, "count the multi-token-prediction layers' weights (num_nextn_predict_layers)")
	fs.BoolVar(&c.noWeights, "exclude-weights", false, "leave the weights out of the budget (they live elsewhere or are already resident)")
}

// options turns the flags into arena.FitOptions; changed reports whether a
// flag was given. --gpu-memory-utilization and --reserve are set only when
// given, so that unset means arena's default and a given 0 means 0, as in
// the API (a 0 utilization is refused there, with the flag named).
func (c *fitCmd) options(changed func(string) bool) (arena.FitOptions, error) {
	o := arena.FitOptions{
		Weights:          arena.WeightOptions{IncludeMTP: c.includeMTP},
		ExcludeWeights:   c.noWeights,
		UtilizationScope: arena.UtilizationScope(c.scope),
		SamplerWarmup:    arena.SamplerWarmup(c.sampler),
		CUDAGraphs:       arena.CUDAGraphs(c.graphs),
	}
	if changed("gpu-memory-utilization") {
		if err := checkUtilization(c.utilization); err != nil {
			return o, err
		}
		o.GPUMemoryUtilization = &c.utilization
	}
	if changed("reserve") {
		o.ReserveBytes = new(int64(c.reserve))
	}
	switch c.layout {
	case "engine":
	case "checkpoint":
		o.Weights.CheckpointLayout = true
	default:
		return o, fmt.Errorf("--weights-layout %q: want engine or checkpoint", c.layout)
	}
	if err := o.Weights.MXFP4Backend.UnmarshalText([]byte(c.mxfp4)); err != nil {
		return o, fmt.Errorf("--mxfp4-backend: %w", err)
	}
	switch c.weightDType {
	case "":
	case "bf16":
		o.Weights.DType = arena.BF16
	case "f32":
		o.Weights.DType = arena.F32
	case "fp8":
		o.Weights.DType = arena.FP8
	default:
		return o, fmt.Errorf("--weight-dtype %q: want bf16, f32 or fp8", c.weightDType)
	}
	return o, nil
}

// run plans, fits and writes the report; it returns a negative answer
// (exit status 1) when the plan does not fit. changed reports whether a
// flag was given.
func (c *fitCmd) run(w io.Writer, changed func(string) bool) error {
	if c.plan.config == "" && c.model == "" {
		return errors.New("--config or --model is required")
	}
	if err := c.parallel.check(); err != nil {
		return err
	}
	if c.model != "" && c.parallel.layout.GPUs() > 1 {
		return fmt.Errorf("--model with %s: a checkpoint's sizes are per model, not per rank; give --config", c.parallel.layout)
	}
	if c.plan.config == "" {
		c.plan.config = c.model
	}
	cfg, plan, err := c.plan.plan(changed)
	if err != nil {
		return err
	}
	if c.model != "" && c.plan.config != c.model {
		if err := checkModelMatches(cfg, c.plan.config, c.model); err != nil {
			return err
		}
	}
	total, name, err := c.device.total(changed)
	if err != nil {
		return err
	}
	if int64(c.used) > total {
		return fmt.Errorf("--device-used %s is more than the device memory (--device-memory or --device) %s", bytesAndHuman(int64(c.used)), bytesAndHuman(total))
	}
	opts, err := c.options(changed)
	if err != nil {
		return err
	}
	if c.model != "" {
		sizes, err := checkpointTensorBytes(c.model)
		if err != nil {
			return fmt.Errorf("--model: %w", err)
		}
		opts.CheckpointPooledTensorBytes = sizes
	}
	dev := arena.DeviceMemory{TotalBytes: total, FreeBytes: total - int64(c.used)}
	if c.parallel.layout.GPUs() > 1 {
		return c.runRanks(w, cfg, dev, opts)
	}
	r, err := arena.Fit(plan, cfg, dev, opts)
	if err != nil {
		return withFlag(err)
	}
	c.app.logger.Info("fit", "model_type", plan.ModelType, "report", r)
	if c.svg != "" {
		if err := writeFitSVG(c.svg, plan, r); err != nil {
			return err
		}
	}
	if c.jsonOut {
		err = writeJSON(w, r)
	} else {
		writeFitText(w, c.plan.config, name, plan, r)
	}
	if err != nil {
		return err
	}
	if !r.Fits {
		return negative(fmt.Errorf("%s does not fit: short by %s", plan.ModelType, bytesAndHuman(r.ShortfallBytes)))
	}
	return nil
}

// runRanks fits every rank of the parallel layout, each on a device like
// dev, and writes the report; it returns a negative answer (exit status
// 1) when a rank does not fit.
func (c *fitCmd) runRanks(w io.Writer, cfg *arena.ModelConfig, dev arena.DeviceMemory, opts arena.FitOptions) error {
	r, err := arena.FitRanks(cfg, c.plan.opts, c.parallel.layout, []arena.DeviceMemory{dev}, opts)
	if err != nil {
		return withFlag(err)
	}
	c.app.logger.Info("fit", "model_type", r.ModelType, "layout", r.Layout.String(), "fits", r.Fits, "kv_blocks", r.KVBlocks)
	if c.svg != "" {
		if err := writeRanksFitSVG(c.svg, r); err != nil {
			return err
		}
	}
	if c.jsonOut {
		err = writeJSON(w, r)
	} else {
		writeRanksFitText(w, c.plan.config, r)
	}
	if err != nil {
		return err
	}
	if !r.Fits {
		return negative(fmt.Errorf("%s does not fit on %s: the fullest rank is short by %s", r.ModelType, r.Layout, bytesAndHuman(r.ShortfallBytes)))
	}
	return nil
}

// writeRanksFitText writes a layout's per-rank fit as a readable report.
func writeRanksFitText(w io.Writer, config string, r *arena.RankFitReport) {
	verdict := "FITS"
	if !r.Fits {
		verdict = "DOES NOT FIT"
	}
	fmt.Fprintf(w, "%s: %s (%s) on %d GPUs, %s\n\n", verdict, r.ModelType, config, r.GPUs, r.Layout)
	writeRanks(w, r)
	if r.Fits {
		return
	}
	fmt.Fprintf(w, "\nshortfall of the fullest rank: %s\n", bytesAndHuman(r.ShortfallBytes))
	s := r.Suggestions
	if s == nil {
		return
	}
	if s.TensorParallelSize > 0 && s.FitSuggestions == (arena.FitSuggestions{}) {
		fmt.Fprintln(w, "\nany one of these makes it fit:")
	} else {
		writeSuggestions(w, &s.FitSuggestions)
	}
	if s.TensorParallelSize > 0 {
		fmt.Fprintf(w, "  --tensor-parallel-size %d\n", s.TensorParallelSize)
	}
}

// writeFitText writes the fit as a readable report; device is the
// preset's device name, "" without one.
func writeFitText(w io.Writer, config, device string, p *arena.Plan, r *arena.FitReport) {
	verdict := "FITS"
	if !r.Fits {
		verdict = "DOES NOT FIT"
	}
	fmt.Fprintf(w, "%s: %s (%s)\n\n", verdict, p.ModelType, config)
	tw := newTable(w)
	memory := bytesAndHuman(r.Device.TotalBytes)
	if device != "" {
		memory += "  (" + device + ")"
	}
	row(tw, "device memory", memory)
	if r.UtilizationScope == arena.UtilizationInstance {
		row(tw, "budget", fmt.Sprintf("%s = ⌈%g × device memory⌉, this process's alone (utilization scope instance, vLLM's rule)", bytesAndHuman(r.BudgetBytes), r.GPUMemoryUtilization))
		row(tw, "used by others", fmt.Sprintf("%s (not counted; they must leave the budget free)", bytesAndHuman(r.UsedByOthersBytes)))
		row(tw, "process budget", bytesAndHuman(r.ProcessBudgetBytes))
	} else {
		row(tw, "budget", fmt.Sprintf("%s = %g × device memory, every process together (utilization scope device)", bytesAndHuman(r.BudgetBytes), r.GPUMemoryUtilization))
		row(tw, "used by others", bytesAndHuman(r.UsedByOthersBytes))
		row(tw, "process budget", fmt.Sprintf("%s = budget − used by others", bytesAndHuman(r.ProcessBudgetBytes)))
	}
	weights := bytesAndHuman(r.WeightBytes)
	if r.Weights != nil {
		weights += fmt.Sprintf("  (%s params, %s active per token)", paramCount(r.Weights.TotalParams), paramCount(r.Weights.ActiveParams))
	}
	row(tw, "weights", weights)
	if r.WeightSource == "checkpoint" {
		row(tw, "  from", "the checkpoint's safetensors headers")
		row(tw, "  tensors", bytesAndHuman(r.CheckpointWeightBytes))
		row(tw, "  pool padding", fmt.Sprintf("%s (each tensor at a %d-byte-aligned offset of one pooled allocation)", bytesAndHuman(r.WeightPaddingBytes), arena.PoolAlign))
		row(tw, "  estimate", fmt.Sprintf("%s from config.json (%+d B against the checkpoint)", bytesAndHuman(r.EstimatedWeightBytes), r.EstimatedWeightBytes-r.CheckpointWeightBytes))
	}
	row(tw, "arena", fmt.Sprintf("%s (logits %s, logits_rows %s)", bytesAndHuman(r.ArenaBytes), human(p.Buffers[arena.Logits].Bytes), p.Options.LogitsRows))
	row(tw, "slabs", bytesAndHuman(r.SlabBytes))
	row(tw, "reserve", bytesAndHuman(r.ReserveBytes))
	if r.SamplerWarmup != arena.SamplerWarmupNone {
		row(tw, "sampler pass", fmt.Sprintf("%s = %d × vocab × %d B (sampler warm-up %s), %s of it inside the budget beyond the arena",
			bytesAndHuman(r.SamplerPassBytes), r.SamplerRows, r.SamplerBytesPerElement, r.SamplerWarmup, human(r.SamplerBudgetBytes)))
	}
	if r.CUDAGraphs != arena.CUDAGraphsNone {
		where := "captured after the KV cache is sized, outside the budget"
		if r.CUDAGraphs == arena.CUDAGraphsEstimated {
			where = "estimated and counted inside the budget"
		}
		row(tw, "cuda graphs", fmt.Sprintf("%s, %s: %d piecewise (%d pieces each) and %d full captures up to %d tokens, activations %s",
			bytesAndHuman(r.CUDAGraphBytes), where, r.CUDAGraphPiecewiseCaptures, r.CUDAGraphPieces, r.CUDAGraphFullCaptures,
			r.CUDAGraphLargestCapture, human(r.CUDAGraphActivationBytes)))
	}
	if r.OutsideBudgetBytes > 0 || r.OutsideRequiredBytes > 0 {
		row(tw, "outside the budget", fmt.Sprintf("%s free for %s allocated after the KV cache is sized", bytesAndHuman(r.OutsideBudgetBytes), human(r.OutsideRequiredBytes)))
	}
	row(tw, "kv budget", bytesAndHuman(r.KVBudgetBytes))
	if r.KVBytesPerBlock > 0 {
		row(tw, "kv cache", fmt.Sprintf("%d blocks of %d tokens (%s each, %s) = %d tokens = %s",
			r.KVBlocks, p.Options.KVBlockSize, human(r.KVBytesPerBlock), r.KV.KVCacheDType, r.KVTokens, bytesAndHuman(r.KVCacheBytes)))
	}
	if r.FixedBytesPerSeq > 0 {
		row(tw, "state per sequence", fmt.Sprintf("%s (sliding-window blocks, recurrent state), %d sequences set aside = %s",
			human(r.FixedBytesPerSeq), r.StateSeqs, bytesAndHuman(r.StateCacheBytes)))
	}
	row(tw, "one sequence", fmt.Sprintf("%s at max_seq_len %d", bytesAndHuman(r.SeqBytes), r.MaxSeqLen))
	row(tw, "max concurrent sequences", fmt.Sprintf("%d at max_seq_len %d", r.MaxConcurrentSeqs, r.MaxSeqLen))
	row(tw, "required", bytesAndHuman(r.RequiredBytes))
	if r.Fits {
		row(tw, "headroom", bytesAndHuman(r.HeadroomBytes))
	} else {
		row(tw, "shortfall", bytesAndHuman(r.ShortfallBytes))
	}
	tw.Flush()
	if !r.Fits {
		if len(r.Largest) > 0 {
			fmt.Fprintln(w, "\nlargest items:")
			tw = newTable(w)
			for _, it := range r.Largest {
				row(tw, " ", it.Name, it.Kind, bytesAndHuman(it.Bytes))
			}
			tw.Flush()
		}
		writeSuggestions(w, r.Suggestions)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		writeNotes(w, r.Notes)
	}
}

// writeSuggestions lists the smallest single changes that make it fit.
func writeSuggestions(w io.Writer, s *arena.FitSuggestions) {
	if s == nil || *s == (arena.FitSuggestions{}) {
		fmt.Fprintln(w, "\nno single change of max_batch_tokens, max_seq_len, gpu_memory_utilization or logits_rows makes it fit")
		return
	}
	fmt.Fprintln(w, "\nany one of these makes it fit:")
	if s.MaxBatchTokens > 0 {
		fmt.Fprintf(w, "  --max-batch-tokens %d\n", s.MaxBatchTokens)
	}
	if s.MaxSeqLen > 0 {
		fmt.Fprintf(w, "  --max-seq-len %d\n", s.MaxSeqLen)
	}
	if s.GPUMemoryUtilization > 0 {
		fmt.Fprintf(w, "  --gpu-memory-utilization %g\n", s.GPUMemoryUtilization)
	}
	if s.LogitsRows != "" {
		fmt.Fprintf(w, "  --logits-rows %s\n", s.LogitsRows)
	}
}

// checkpointTensorBytes is the sizes in bytes of the tensors of the
// safetensors checkpoint in the model folder dir, from its headers only
// (checkpoint.Open checks every header and reads no tensor data), for the
// fit to count them as a pooled load allocates them (tensors plus padding).
// Errors: checkpoint.Open's *checkpoint.Error.
func checkpointTensorBytes(dir string) ([]int64, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	sizes := gpuworker.TensorBytes(ck.Tensors())
	return sizes, ck.Close()
}
