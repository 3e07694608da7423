// Package vllmflags lets the example programs take vLLM's names for the
// serving options they share with it: a user who types vLLM's flags gets
// the same option, not "unknown flag".
package vllmflags

import (
	"strings"

	"github.com/spf13/pflag"
)

// Aliases maps vLLM's engine-argument names (vllm/engine/arg_utils.py,
// EngineArgs) to the examples' flags of the same meaning. Names that are
// the same in both (tensor-parallel-size, gpu-memory-utilization,
// kv-cache-dtype, enable-expert-parallel, …) need no entry.
var Aliases = map[string]string{
	"max-model-len":          "max-seq-len",
	"max-num-batched-tokens": "max-batch-tokens",
	"max-num-seqs":           "max-batch-size",
	"block-size":             "kv-block-size",
	"max-lora-rank":          "lora-max-rank",
}

// Normalize is a pflag normalization function (cobra's
// Command.SetGlobalNormalizationFunc): it accepts underscores for dashes,
// as vLLM's argument parser does, and maps Aliases to the examples' names.
func Normalize(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	name = strings.ReplaceAll(name, "_", "-")
	if to, ok := Aliases[name]; ok {
		name = to
	}
	return pflag.NormalizedName(name)
}
