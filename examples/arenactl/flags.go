package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// planFlags are the flags plan, fit and run share: the config file and the
// serving options, one flag per arena.Options field, named after the field's
// snake_case name (max_batch_tokens → --max-batch-tokens). They are
// registered and turned into a plan here and nowhere else.
type planFlags struct {
	config     string
	opts       arena.Options
	kMax       int64 // --k-max, set in opts only when given
	logitsRows string
	kvDType    string
	ssmDType   string
}

// register adds the plan flags to fs. configDefault "" makes --config
// required (the caller marks it); otherwise it is the default path. Every
// option flag whose 0 means "arena's default" (arena.Options.Resolve)
// defaults to 0, so the defaults live in one place; the help text names
// them. --k-max, whose 0 is a value (no speculative decoding), shows
// arena.DefaultKMax and is passed to arena only when given.
func (f *planFlags) register(fs *pflag.FlagSet, configDefault string) {
	usage := "Hugging Face config.json of the model, or the model folder that holds it, or the name of a built-in one (examples/configs: llama-3.1-8b, qwen3-8b, deepseek-v3, …)"
	if configDefault == "" {
		usage += " (required)"
	}
	fs.StringVar(&f.config, "config", configDefault, usage)
	fs.Int64Var(&f.opts.MaxBatchTokens, "max-batch-tokens", 0,
		fmt.Sprintf("max_batch_tokens (M): most tokens in one forward step (0: %d)", arena.DefaultMaxBatchTokens))
	fs.Int64Var(&f.opts.MaxSeqLen, "max-seq-len", 0,
		fmt.Sprintf("max_seq_len: longest sequence in tokens, at most the model's limit (max_position_embeddings, extended by rope_scaling) "+
			"unless --allow-long-max-seq-len (0: min(max_position_embeddings, %d))", arena.DefaultMaxSeqLenCap))
	fs.BoolVar(&f.opts.AllowLongMaxSeqLen, "allow-long-max-seq-len", false,
		"accept a --max-seq-len above the model's limit, as vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 does (positions past it give wrong outputs)")
	fs.Int64Var(&f.opts.KVBlockSize, "kv-block-size", 0,
		fmt.Sprintf("kv_block_size: tokens per paged KV-cache block, at most %d (0: %d)", arena.MaxKVBlockSize, arena.DefaultKVBlockSize))
	fs.Int64Var(&f.opts.MaxBatchSize, "max-batch-size", 0,
		fmt.Sprintf("max_batch_size: most sequences in one decode step, at most max_batch_tokens (0: min(%d, max_batch_tokens))", arena.DefaultMaxBatchSize))
	fs.Int64Var(&f.kMax, "k-max", arena.DefaultKMax,
		fmt.Sprintf("k_max: speculative tokens verified per step, at most %d (0: no speculative decoding)", arena.MaxKMax))
	fs.Int64Var(&f.opts.LoRAMaxRank, "lora-max-rank", 0,
		fmt.Sprintf("lora_max_rank: largest LoRA adapter rank, at most %d (0: no LoRA scratch)", arena.MaxLoRAMaxRank))
	fs.BoolVar(&f.opts.FP8Rowwise, "fp8-rowwise", false, "fp8_rowwise: FP8 row-wise GDN weights (adds the "+arena.SlabSSMRowwiseW+" slab)")
	fs.BoolVar(&f.opts.Q2Prefill, "q2-prefill", false, "q2_prefill: native Q2 prefill path and its scratch buffers")
	fs.StringVar(&f.logitsRows, "logits-rows", string(arena.LogitsAll),
		"logits_rows: all (a logits row per token, [max_batch_tokens, vocab]) or sampled (only the sampled positions, "+
			"[max_batch_size·(1 + k_max), vocab], as vLLM and SGLang compute them)")
	fs.StringVar(&f.kvDType, "kv-cache-dtype", string(arena.KVCacheAuto),
		"kv_cache_dtype, as vLLM's --kv-cache-dtype: auto (the model dtype), bfloat16 (bf16), float16 (fp16), fp8 (= fp8_e4m3), fp8_e4m3, fp8_e5m2")
	fs.StringVar(&f.ssmDType, "mamba-ssm-cache-dtype", string(arena.SSMCacheAuto),
		"mamba_ssm_cache_dtype, as vLLM's: auto (the config's, else float32 for Mamba-2 and the model dtype for GDN), float32, float16, bfloat16")
}

// plan loads the config and sizes its arena; changed reports whether a flag
// was given on the command line (cobra's cmd.Flags().Changed). Option errors
// come from arena (which names the option) with the flag added.
func (f *planFlags) plan(changed func(string) bool) (*arena.ModelConfig, *arena.Plan, error) {
	if f.config == "" {
		return nil, nil, errors.New("--config: no config.json given")
	}
	f.opts.KMax = nil
	if changed("k-max") {
		f.opts.KMax = &f.kMax
	}
	f.opts.LogitsRows = arena.LogitsRows(f.logitsRows)
	f.opts.KVCacheDType = arena.KVCacheDType(f.kvDType)
	f.opts.MambaSSMCacheDType = arena.SSMCacheDType(f.ssmDType)
	cfg, err := loadConfig(f.config)
	if err != nil {
		return nil, nil, err
	}
	plan, err := arena.PlanFor(cfg, f.opts)
	if err != nil {
		return nil, nil, withFlag(err)
	}
	return cfg, plan, nil
}

// optionFlags maps arena's option names to the flags that set them where the
// name is not simply the flag's (snake_case → kebab-case).
var optionFlags = map[string]string{
	"checkpoint_weight_bytes": "model",
	"total_bytes":             "device-memory",
	"free_bytes":              "device-used",
	"used_by_others_bytes":    "device-used",
}

// withFlag adds the flag's name to an *arena.OptionError, so the message says
// what to change on the command line, and the layout flag to an
// *arena.ParallelError; a *arena.MaxSeqLenError names
// --max-seq-len and --allow-long-max-seq-len.
func withFlag(err error) error {
	var me *arena.MaxSeqLenError
	if errors.As(err, &me) {
		return fmt.Errorf("--max-seq-len: %w (--allow-long-max-seq-len)", err)
	}
	var pe *arena.ParallelError
	if errors.As(err, &pe) {
		return fmt.Errorf("--%s: %w", strings.ReplaceAll(pe.Option, "_", "-"), err)
	}
	var oe *arena.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	flag, ok := optionFlags[oe.Option]
	if !ok {
		flag = strings.ReplaceAll(oe.Option, "_", "-")
	}
	return fmt.Errorf("--%s: %w", flag, err)
}

// addUtilizationFlag adds --gpu-memory-utilization. Unset, it is
// arena.DefaultGPUMemoryUtilization, as in the API; 0 is refused, as in the
// API (checkUtilization).
func addUtilizationFlag(fs *pflag.FlagSet, p *float64) {
	fs.Float64Var(p, "gpu-memory-utilization", arena.DefaultGPUMemoryUtilization,
		"fraction (0, 1] of the device's total memory this process may hold; memory used by others counts against it")
}

// checkUtilization is arena.ValidateGPUMemoryUtilization's error for u, with
// the flag's name.
func checkUtilization(u float64) error {
	if err := arena.ValidateGPUMemoryUtilization(u); err != nil {
		return withFlag(err)
	}
	return nil
}

// deviceMemoryFlags are --device-memory and --device NAME: the device's
// total memory given in bytes or as a preset (arena.DevicePresets), and,
// where the command has one, --device ORDINAL.
type deviceMemoryFlags struct {
	memory  byteSize
	preset  *arena.DevicePreset
	ordinal *int // nil: --device takes a preset only
}

// register adds --device-memory (what says what it is) and --device to fs.
func (d *deviceMemoryFlags) register(fs *pflag.FlagSet, what string) {
	d.memory = byteSize(gpuworker.H200Bytes)
	fs.Var(&d.memory, "device-memory", what+": a size with its unit, 80GB (×10^9 B), 80GiB (×2^30 B) or 85899345920B; "+
		"the default is an H200's total as its driver reports it")
	names := make([]string, 0, 8)
	for _, p := range arena.DevicePresets() {
		names = append(names, p.Name)
	}
	usage := "a named device, whose total memory as its driver reports it is the device memory: " + strings.Join(names, ", ")
	if d.ordinal != nil {
		usage = "device ordinal (a backend with several devices, such as cuda), or " + usage + " (hostsim)"
	}
	fs.Var((*deviceValue)(d), "device", usage)
}

// total is the device memory the flags give, and the preset's device name
// ("" without one); changed reports whether a flag was given. Errors:
// both --device NAME and --device-memory, or a size that is not positive.
func (d *deviceMemoryFlags) total(changed func(string) bool) (int64, string, error) {
	if d.preset != nil {
		if changed("device-memory") {
			return 0, "", fmt.Errorf("--device %s and --device-memory: give one (the preset's total is %d B)", d.preset.Name, d.preset.TotalBytes)
		}
		return d.preset.TotalBytes, d.preset.Device, nil
	}
	if d.memory <= 0 {
		return 0, "", fmt.Errorf("--device-memory %d B: must be positive", int64(d.memory))
	}
	return int64(d.memory), "", nil
}

// deviceValue is --device as a pflag.Value: an ordinal (where allowed) or
// a preset name.
type deviceValue deviceMemoryFlags

// Set implements pflag.Value.
func (v *deviceValue) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if v.ordinal == nil {
			return fmt.Errorf("%q: this command takes a device name, not an ordinal", s)
		}
		if n < 0 {
			return fmt.Errorf("ordinal %d: must not be negative", n)
		}
		*v.ordinal, v.preset = n, nil
		return nil
	}
	p, err := arena.LookupDevicePreset(s)
	if err != nil {
		return err
	}
	v.preset = &p
	return nil
}

// String implements pflag.Value.
func (v *deviceValue) String() string {
	switch {
	case v.preset != nil:
		return v.preset.Name
	case v.ordinal != nil:
		return strconv.Itoa(*v.ordinal)
	}
	return ""
}

// Type implements pflag.Value.
func (v *deviceValue) Type() string { return "device" }

// backendFlags select the backend for run, soak, bench and devices.
type backendFlags struct {
	kind    string
	ordinal int
	device  deviceMemoryFlags
}

// register adds --backend, --device-memory and --device (an ordinal too
// when withOrdinal).
func (b *backendFlags) register(fs *pflag.FlagSet, withOrdinal bool) {
	fs.StringVar(&b.kind, "backend", gpuworker.KindHostSim,
		"backend, one of those built in: "+strings.Join(gpuworker.Backends(), ", ")+" (hostsim: the simulated device; cuda needs a -tags cuda build)")
	if withOrdinal {
		b.device.ordinal = &b.ordinal
	}
	b.device.register(fs, "hostsim only, the simulated device's capacity")
}

// config returns the gpuworker backend configuration for device ordinal.
// It refuses a backend that is not built in (a *gpuworker.BackendNotBuiltInError),
// and --device-memory or a --device preset with a backend other than
// hostsim (changed reports whether a flag was set on the command line).
func (b *backendFlags) config(ordinal int, changed func(string) bool) (gpuworker.BackendConfig, error) {
	switch {
	case b.kind == gpuworker.KindHostSim:
		total, device, err := b.device.total(changed)
		if err != nil {
			return gpuworker.BackendConfig{}, err
		}
		if ordinal != 0 {
			return gpuworker.BackendConfig{}, fmt.Errorf("--device %d: hostsim has one device, ordinal 0", ordinal)
		}
		name := "hostsim"
		switch {
		case device != "":
			name += " " + device
		case total == gpuworker.H200Bytes:
			name = "hostsim H200"
		}
		return gpuworker.BackendConfig{Kind: gpuworker.KindHostSim,
			HostSim: gpuworker.HostSimConfig{Name: name, TotalBytes: total}}, nil
	case !slices.Contains(gpuworker.Backends(), b.kind):
		return gpuworker.BackendConfig{}, fmt.Errorf("--backend %q: %w", b.kind, &gpuworker.BackendNotBuiltInError{Name: b.kind, Available: gpuworker.Backends()})
	case changed("device-memory") || b.device.preset != nil:
		return gpuworker.BackendConfig{}, fmt.Errorf("--device-memory and --device NAME: apply to the hostsim backend only (%s reports its own memory)", b.kind)
	default:
		return gpuworker.BackendConfig{Kind: b.kind, Ordinal: ordinal}, nil
	}
}

// parallelFlags are vLLM's parallel-layout flags (--tensor-parallel-size,
// --pipeline-parallel-size, --data-parallel-size,
// --enable-expert-parallel), as arena.ParallelLayout.
type parallelFlags struct {
	layout arena.ParallelLayout
}

// check refuses a size below 1, naming the flag (arena reads 0 as 1, which
// would hide a typo such as --tensor-parallel-size -2).
func (p *parallelFlags) check() error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"tensor-parallel-size", p.layout.TensorParallelSize}, {"pipeline-parallel-size", p.layout.PipelineParallelSize}, {"data-parallel-size", p.layout.DataParallelSize}} {
		if f.v < 1 {
			return fmt.Errorf("--%s %d: must be at least 1", f.name, f.v)
		}
	}
	return nil
}

// register adds the parallel-layout flags to fs.
func (p *parallelFlags) register(fs *pflag.FlagSet) {
	fs.Int64Var(&p.layout.TensorParallelSize, "tensor-parallel-size", 1,
		"tensor_parallel_size t: split heads, MLP widths and the vocabulary over t GPUs (vLLM's flag)")
	fs.Int64Var(&p.layout.PipelineParallelSize, "pipeline-parallel-size", 1,
		"pipeline_parallel_size p: split the layers over p GPUs as vLLM's get_pp_indices does")
	fs.Int64Var(&p.layout.DataParallelSize, "data-parallel-size", 1,
		"data_parallel_size d: d replicas, each with its own requests and KV cache; with --enable-expert-parallel, data-parallel attention")
	fs.BoolVar(&p.layout.EnableExpertParallel, "enable-expert-parallel", false,
		"place whole routed experts on the t·d ranks (E / (t·d) each) instead of splitting every expert's width")
}
