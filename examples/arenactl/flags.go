package main

import (
	"errors"
	"fmt"
	"slices"
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
	config string
	opts   arena.Options
	kMax   int64 // --k-max, set in opts only when given
}

// register adds the plan flags to fs. configDefault "" makes --config
// required (the caller marks it); otherwise it is the default path. Every
// option flag whose 0 means "arena's default" (arena.Options.Resolve)
// defaults to 0, so the defaults live in one place; the help text names
// them. --k-max, whose 0 is a value (no speculative decoding), shows
// arena.DefaultKMax and is passed to arena only when given.
func (f *planFlags) register(fs *pflag.FlagSet, configDefault string) {
	usage := "Hugging Face config.json of the model, or the model folder that holds it"
	if configDefault == "" {
		usage += " (required)"
	}
	fs.StringVar(&f.config, "config", configDefault, usage)
	fs.Int64Var(&f.opts.MaxBatchTokens, "max-batch-tokens", 0,
		fmt.Sprintf("max_batch_tokens (M): most tokens in one forward step (0: %d)", arena.DefaultMaxBatchTokens))
	fs.Int64Var(&f.opts.MaxSeqLen, "max-seq-len", 0,
		fmt.Sprintf("max_seq_len: longest sequence in tokens (0: min(max_position_embeddings, %d))", arena.DefaultMaxSeqLenCap))
	fs.Int64Var(&f.opts.KVBlockSize, "kv-block-size", 0,
		fmt.Sprintf("kv_block_size: tokens per paged KV-cache block (0: %d)", arena.DefaultKVBlockSize))
	fs.Int64Var(&f.opts.MaxBatchSize, "max-batch-size", 0,
		fmt.Sprintf("max_batch_size: most sequences in one decode step, at most max_batch_tokens (0: min(%d, max_batch_tokens))", arena.DefaultMaxBatchSize))
	fs.Int64Var(&f.kMax, "k-max", arena.DefaultKMax,
		"k_max: speculative tokens verified per step (0: no speculative decoding)")
	fs.Int64Var(&f.opts.LoRAMaxRank, "lora-max-rank", 0, "lora_max_rank: largest LoRA adapter rank (0: no LoRA scratch)")
	fs.BoolVar(&f.opts.FP8Rowwise, "fp8-rowwise", false, "fp8_rowwise: FP8 row-wise GDN weights (adds the "+arena.SlabSSMRowwiseW+" slab)")
	fs.BoolVar(&f.opts.Q2Prefill, "q2-prefill", false, "q2_prefill: native Q2 prefill path and its scratch buffers")
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
	cfg, err := arena.LoadConfig(f.config)
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
	"total_bytes":          "device-memory",
	"free_bytes":           "device-used",
	"used_by_others_bytes": "device-used",
}

// withFlag adds the flag's name to an *arena.OptionError, so the message says
// what to change on the command line.
func withFlag(err error) error {
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

// addDeviceMemoryFlag adds --device-memory, the simulated device's capacity.
func addDeviceMemoryFlag(fs *pflag.FlagSet, p *byteSize, what string) {
	*p = byteSize(gpuworker.H200Bytes)
	fs.Var(p, "device-memory", what+": bytes or a size like 141GiB, 80GB, 1.5TiB")
}

// backendFlags select the backend for run and devices.
type backendFlags struct {
	kind    string
	ordinal int
	memory  byteSize
}

// register adds --backend and --device-memory, and --device when withOrdinal.
func (b *backendFlags) register(fs *pflag.FlagSet, withOrdinal bool) {
	fs.StringVar(&b.kind, "backend", gpuworker.KindHostSim,
		"backend, one of those built in: "+strings.Join(gpuworker.Backends(), ", ")+" (hostsim: the simulated device; cuda needs a -tags cuda build)")
	if withOrdinal {
		fs.IntVar(&b.ordinal, "device", 0, "device ordinal (a backend with several devices, such as cuda)")
	}
	addDeviceMemoryFlag(fs, &b.memory, "hostsim only, the simulated device's capacity")
}

// config returns the gpuworker backend configuration for device ordinal.
// It refuses a backend that is not built in (a *gpuworker.BackendNotBuiltInError),
// and --device-memory with a backend other than hostsim (changed reports
// whether a flag was set on the command line).
func (b *backendFlags) config(ordinal int, changed func(string) bool) (gpuworker.BackendConfig, error) {
	switch {
	case b.kind == gpuworker.KindHostSim:
		if b.memory <= 0 {
			return gpuworker.BackendConfig{}, fmt.Errorf("--device-memory %d: must be positive", int64(b.memory))
		}
		if changed("device") && ordinal != 0 {
			return gpuworker.BackendConfig{}, fmt.Errorf("--device %d: hostsim has one device, ordinal 0", ordinal)
		}
		name := "hostsim"
		if int64(b.memory) == gpuworker.H200Bytes {
			name = "hostsim H200"
		}
		return gpuworker.BackendConfig{Kind: gpuworker.KindHostSim,
			HostSim: gpuworker.HostSimConfig{Name: name, TotalBytes: int64(b.memory)}}, nil
	case !slices.Contains(gpuworker.Backends(), b.kind):
		return gpuworker.BackendConfig{}, fmt.Errorf("--backend %q: %w", b.kind, &gpuworker.BackendNotBuiltInError{Name: b.kind, Available: gpuworker.Backends()})
	case changed("device-memory"):
		return gpuworker.BackendConfig{}, fmt.Errorf("--device-memory: applies to the hostsim backend only (%s reports its own)", b.kind)
	default:
		return gpuworker.BackendConfig{Kind: b.kind, Ordinal: ordinal}, nil
	}
}
