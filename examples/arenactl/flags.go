package main

import (
	"errors"
	"fmt"
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
}

// register adds the plan flags to fs. configDefault "" makes --config
// required (the caller marks it); otherwise it is the default path. Every
// option flag defaults to 0, "arena's default" (arena.Options.Resolve), so the
// defaults live in one place; the help text names them.
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
	fs.Int64Var(&f.opts.KMax, "k-max", 0,
		fmt.Sprintf("k_max: speculative tokens verified per step (0: %d)", arena.DefaultKMax))
	fs.Int64Var(&f.opts.LoRAMaxRank, "lora-max-rank", 0, "lora_max_rank: largest LoRA adapter rank (0: no LoRA scratch)")
	fs.BoolVar(&f.opts.FP8Rowwise, "fp8-rowwise", false, "fp8_rowwise: FP8 row-wise GDN weights (adds the "+arena.SlabSSMRowwiseW+" slab)")
	fs.BoolVar(&f.opts.Q2Prefill, "q2-prefill", false, "q2_prefill: native Q2 prefill path and its scratch buffers")
}

// plan loads the config and sizes its arena. Option errors come from arena
// (which names the option) with the flag added.
func (f *planFlags) plan() (*arena.ModelConfig, *arena.Plan, error) {
	if f.config == "" {
		return nil, nil, errors.New("--config: no config.json given")
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
	"total_bytes": "device-memory",
	"free_bytes":  "device-used",
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

// addUtilizationFlag adds --gpu-memory-utilization.
func addUtilizationFlag(fs *pflag.FlagSet, p *float64) {
	fs.Float64Var(p, "gpu-memory-utilization", arena.DefaultGPUMemoryUtilization,
		"fraction (0, 1] of the device's total memory this process may hold; memory used by others counts against it")
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
	fs.StringVar(&b.kind, "backend", gpuworker.KindHostSim, "backend: hostsim (simulated device) or cuda (needs a -tags cuda build)")
	if withOrdinal {
		fs.IntVar(&b.ordinal, "device", 0, "CUDA device ordinal (cuda only)")
	}
	addDeviceMemoryFlag(fs, &b.memory, "hostsim only, the simulated device's capacity")
}

// config returns the gpuworker backend configuration for device ordinal.
// It refuses an unknown backend, and --device-memory with cuda (changed
// reports whether a flag was set on the command line).
func (b *backendFlags) config(ordinal int, changed func(string) bool) (gpuworker.BackendConfig, error) {
	switch b.kind {
	case gpuworker.KindHostSim:
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
	case gpuworker.KindCUDA:
		if changed("device-memory") {
			return gpuworker.BackendConfig{}, errors.New("--device-memory: applies to the hostsim backend only (cuda reports its own)")
		}
		return gpuworker.BackendConfig{Kind: gpuworker.KindCUDA, Ordinal: ordinal}, nil
	default:
		return gpuworker.BackendConfig{}, fmt.Errorf("--backend %q: want %s or %s", b.kind, gpuworker.KindHostSim, gpuworker.KindCUDA)
	}
}
