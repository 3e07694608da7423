package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/internal/modelgen"
)

const genModelLong = `gen-model writes a model folder to test loaders with: DIR/config.json and a
safetensors checkpoint of deterministic pseudo-random weights whose tensor
names, dtypes and shapes are those of the family's Hugging Face checkpoints
(arena.CheckpointTensors: model.layers.N.self_attn.q_proj.weight, Mixtral's
block_sparse_moe.experts.E.w1, gpt-oss's MXFP4 *_blocks/*_scales, DeepSeek-V3's
weight_scale_inv, ...), sharded as save_pretrained shards (--shard-size, 5 GB
by default, with model.safetensors.index.json past one shard).

--layers N keeps the first N decoder layers; config.json then says
num_hidden_layers N (layer_types and Nemotron-H's hybrid_override_pattern are
cut to N), so the folder loads as the model its checkpoint is. The same
--seed gives the same bytes. DIR must be empty or absent.

--zeros writes zero weights as holes in sparse files: the folder has the
model's real listing and sizes (DeepSeek-V3's 673 GB) but takes only its
headers' disk, and reads back zeros at the page cache's speed — to check
the sizing and loading of a model (or of one rank's shard of it, run
--rank) on a machine whose disk cannot hold it.

Families listed: llama, mistral, qwen2, qwen2_moe, qwen3, qwen3_moe, mixtral,
gpt_oss, glm4_moe, qwen3_next, deepseek_v2, deepseek_v3, nemotron_h.`

// genModelCmd holds the flags of "arenactl gen-model".
type genModelCmd struct {
	config  string
	out     string
	seed    uint64
	layers  int64
	shard   byteSize
	zeros   bool
	jsonOut bool
}

// newGenModelCmd builds "arenactl gen-model".
func newGenModelCmd(_ *app) *cobra.Command {
	c := &genModelCmd{shard: byteSize(checkpoint.DefaultShardBytes)}
	cmd := &cobra.Command{
		Use:   "gen-model --config FILE --out DIR [flags]",
		Short: "Write a model folder of deterministic random weights with the family's real tensor names",
		Long:  genModelLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return c.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	fs := cmd.Flags()
	fs.StringVar(&c.config, "config", "", "Hugging Face config.json of the model, the model folder that holds it, or a built-in config by name (required)")
	fs.StringVar(&c.out, "out", "", "the folder to write, empty or absent (required)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the weights: the same seed gives the same bytes")
	fs.Int64Var(&c.layers, "layers", 0, "keep the first N decoder layers (0: all of them)")
	fs.Var(&c.shard, "shard-size", "most tensor bytes per shard: bytes or a size like 5GB, 100MiB")
	fs.BoolVar(&c.zeros, "zeros", false, "write zero weights as holes in sparse files: the real listing and sizes, almost no disk (--seed unused)")
	fs.BoolVar(&c.jsonOut, "json", false, "print the summary as JSON")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// genModelSummary is what gen-model prints.
type genModelSummary struct {
	Dir            string   `json:"dir"`
	ModelType      string   `json:"model_type"`
	Layers         int64    `json:"layers"`
	Seed           uint64   `json:"seed"`
	Files          []string `json:"files"`
	Index          string   `json:"index,omitempty"`
	Tensors        int      `json:"tensors"`
	Bytes          int64    `json:"bytes"`
	EstimatedBytes int64    `json:"estimated_bytes"`
}

// run generates the folder and prints the summary.
func (c *genModelCmd) run(ctx context.Context, w io.Writer) error {
	if c.shard <= 0 {
		return fmt.Errorf("--shard-size %d: must be positive", int64(c.shard))
	}
	if c.layers < 0 {
		return fmt.Errorf("--layers %d: must be ≥ 0", c.layers)
	}
	config, remove, err := resolveConfig(c.config)
	if err != nil {
		return withFlag(err)
	}
	defer remove()
	r, err := modelgen.GenerateContext(ctx, config, c.out, modelgen.Options{Seed: c.seed, Layers: c.layers, ShardBytes: int64(c.shard), Zeros: c.zeros})
	if err != nil {
		return err
	}
	s := genModelSummary{Dir: r.Dir, ModelType: r.ModelType, Layers: r.Layers, Seed: c.seed,
		Tensors: len(r.Tensors), Bytes: r.Manifest.TotalBytes, EstimatedBytes: r.EstimatedBytes}
	for _, f := range r.Manifest.Files {
		s.Files = append(s.Files, filepath.Base(f))
	}
	if r.Manifest.Index != "" {
		s.Index = filepath.Base(r.Manifest.Index)
	}
	if c.jsonOut {
		return writeJSON(w, s)
	}
	fmt.Fprintf(w, "wrote %s: %s, %d layers, seed %d\n\n", s.Dir, s.ModelType, s.Layers, s.Seed)
	tw := newTable(w)
	files := s.Files[0]
	if n := len(s.Files); n > 1 {
		files = fmt.Sprintf("%d (%s … %s)", n, s.Files[0], s.Files[n-1])
	}
	row(tw, "files", files)
	if s.Index != "" {
		row(tw, "index", s.Index)
	}
	row(tw, "tensors", s.Tensors)
	row(tw, "bytes", bytesAndHuman(s.Bytes))
	row(tw, "estimate", bytesAndHuman(s.EstimatedBytes)+" (arena.EstimateWeights of config.json)")
	return tw.Flush()
}
