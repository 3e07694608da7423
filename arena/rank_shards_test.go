package arena

import (
	"errors"
	"fmt"
	"testing"
)

// shardOf is rank's shard of the tensor called name.
func shardOf(t *testing.T, cfg *ModelConfig, l ParallelLayout, rank int64, name string) TensorShard {
	t.Helper()
	shards, err := RankShards(cfg, WeightOptions{}, l, rank)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shards {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no tensor %s", name)
	return TensorShard{}
}

// Hand-worked slices of Llama-3.1-8B (Hq 32, Hkv 8, head_dim 128, hidden
// 4096, intermediate 14336, vocab 128256) and Qwen3-30B-A3B (128 experts,
// moe_intermediate 768, hidden 2048).
func TestRankShardsByHand(t *testing.T) {
	llama := loadExample(t, "llama-3.1-8b.json")
	qwen := loadExample(t, "qwen3-30b-a3b.json")
	tp := func(n int64) ParallelLayout { return ParallelLayout{TensorParallelSize: n} }
	for _, c := range []struct {
		cfg        *ModelConfig
		l          ParallelLayout
		rank       int64
		name       string
		kind       ShardKind
		start, len int64
		ranges     int
	}{
		{llama, tp(2), 1, "model.layers.0.self_attn.q_proj.weight", ShardRows, 2048, 2048, 1},
		{llama, tp(2), 1, "model.layers.0.self_attn.k_proj.weight", ShardRows, 512, 512, 1},  // 4 KV heads
		{llama, tp(4), 3, "model.layers.31.self_attn.v_proj.weight", ShardRows, 768, 256, 1}, // 2 KV heads
		{llama, tp(16), 5, "model.layers.0.self_attn.k_proj.weight", ShardRows, 256, 128, 1}, // head 5/2 = 2, replicated twice
		{llama, tp(4), 3, "model.layers.0.self_attn.o_proj.weight", ShardCols, 3072, 1024, 4096},
		{llama, tp(4), 2, "model.layers.0.mlp.up_proj.weight", ShardRows, 7168, 3584, 1},
		{llama, tp(4), 2, "model.layers.0.mlp.down_proj.weight", ShardCols, 7168, 3584, 4096},
		{llama, tp(4), 1, "model.embed_tokens.weight", ShardRows, 32064, 32064, 1},
		{llama, tp(4), 3, "lm_head.weight", ShardRows, 96192, 32064, 1},
		{llama, tp(4), 3, "model.layers.0.input_layernorm.weight", ShardWhole, 0, 0, 1},
		{llama, ParallelLayout{PipelineParallelSize: 2}, 0, "model.layers.16.mlp.up_proj.weight", ShardAbsent, 0, 0, 0},
		{llama, ParallelLayout{PipelineParallelSize: 2}, 1, "model.embed_tokens.weight", ShardAbsent, 0, 0, 0},
		{llama, ParallelLayout{PipelineParallelSize: 2}, 1, "lm_head.weight", ShardWhole, 0, 0, 1},
		{qwen, ParallelLayout{TensorParallelSize: 2, EnableExpertParallel: true}, 1, "model.layers.0.mlp.experts.63.up_proj.weight", ShardAbsent, 0, 0, 0},
		{qwen, ParallelLayout{TensorParallelSize: 2, EnableExpertParallel: true}, 1, "model.layers.0.mlp.experts.64.up_proj.weight", ShardWhole, 0, 0, 1},
		{qwen, ParallelLayout{DataParallelSize: 3, EnableExpertParallel: true}, 1, "model.layers.0.mlp.experts.42.down_proj.weight", ShardAbsent, 0, 0, 0},
		{qwen, ParallelLayout{DataParallelSize: 3, EnableExpertParallel: true}, 1, "model.layers.0.mlp.experts.43.down_proj.weight", ShardWhole, 0, 0, 1}, // 43, 43, 42
		{qwen, ParallelLayout{TensorParallelSize: 2, EnableExpertParallel: true}, 1, "model.layers.0.mlp.gate.weight", ShardWhole, 0, 0, 1},
		{qwen, tp(4), 1, "model.layers.0.mlp.experts.7.down_proj.weight", ShardCols, 192, 192, 2048},
		{qwen, tp(4), 1, "model.layers.0.self_attn.k_norm.weight", ShardWhole, 0, 0, 1},
	} {
		s := shardOf(t, c.cfg, c.l, c.rank, c.name)
		if s.Kind != c.kind || s.Start != c.start || s.Len != c.len || len(s.ByteRanges()) != c.ranges {
			t.Errorf("%s %s rank %d: %v [%d, +%d) in %d ranges, want %v [%d, +%d) in %d", c.name, c.l, c.rank, s.Kind, s.Start, s.Len, len(s.ByteRanges()), c.kind, c.start, c.len, c.ranges)
		}
	}
}

// Every rank's shard bytes sum to PlanRanks' checkpoint bytes for it, and
// every rank reads what it allocates (no example vocabulary needs padding:
// 128256, 151936 and 129280 are multiples of 64).
func TestRankShardsSumToPlanRanks(t *testing.T) {
	for _, c := range []struct {
		config string
		l      ParallelLayout
	}{
		{"llama-3.1-8b.json", ParallelLayout{TensorParallelSize: 2}},
		{"llama-3.1-8b.json", ParallelLayout{TensorParallelSize: 4, PipelineParallelSize: 2}},
		{"qwen3-30b-a3b.json", ParallelLayout{TensorParallelSize: 2, DataParallelSize: 2, EnableExpertParallel: true}},
		{"qwen3-30b-a3b.json", ParallelLayout{TensorParallelSize: 4}},
		{"deepseek-v3.json", ParallelLayout{TensorParallelSize: 8}}, // FP8 scales sliced in blocks
	} {
		t.Run(fmt.Sprintf("%s/%s", c.config, c.l), func(t *testing.T) { checkShardSums(t, c.config, c.l) })
	}
}

// checkShardSums checks that ranks' shards of config under l hold what
// PlanRanks counts and read what they hold: the first and last ranks (they
// hold the embedding and the LM head), every rank for small layouts, and
// under -race the last rank alone for large ones (DeepSeek-V3's listing of
// tens of thousands of tensors costs seconds a rank there).
func checkShardSums(t *testing.T, config string, l ParallelLayout) {
	cfg := loadExample(t, config)
	ranks, err := PlanRanks(cfg, Options{}, WeightOptions{}, l)
	if err != nil {
		t.Fatal(err)
	}
	check := []int{0, len(ranks) - 1}
	switch {
	case len(ranks) <= 4:
		check = check[:0]
		for r := range ranks {
			check = append(check, r)
		}
	case raceEnabled:
		check = check[1:]
	}
	for _, r := range check {
		shards, err := RankShards(cfg, WeightOptions{}, l, int64(r))
		if err != nil {
			t.Fatal(err)
		}
		var held, read int64
		for _, s := range shards {
			held += s.RankBytes()
			read += s.FileBytes()
		}
		if held != ranks[r].Weights.CheckpointBytes || read != held {
			t.Errorf("%s %s rank %d: holds %d B, reads %d B; PlanRanks %d B", config, l, r, held, read, ranks[r].Weights.CheckpointBytes)
		}
	}
}

// A padded vocabulary's last shard reads fewer rows than it allocates, and
// unmodelled splits and bad ranks are refused.
func TestRankShardsPaddingAndErrors(t *testing.T) {
	cfg := loadExample(t, "llama-3.1-8b.json")
	c := *cfg
	c.VocabSize = 128250 // padded to 128256: rank 3 of 4 holds 32064 rows, 32058 real
	s := shardOf(t, &c, ParallelLayout{TensorParallelSize: 4}, 3, "lm_head.weight")
	if s.Len != 32058 || s.RankShape[0] != 32064 || s.FileBytes() != 32058*4096*2 || s.RankBytes() != 32064*4096*2 {
		t.Errorf("padded lm_head shard: %d rows read of %d, %d B of %d B", s.Len, s.RankShape[0], s.FileBytes(), s.RankBytes())
	}
	var oe *OptionError
	if _, err := RankShards(cfg, WeightOptions{}, ParallelLayout{TensorParallelSize: 2}, 2); !errors.As(err, &oe) {
		t.Errorf("rank 2 of 2: err = %v, want *OptionError", err)
	}
	if _, err := RankShards(cfg, WeightOptions{}, ParallelLayout{TensorParallelSize: 3}, 0); !errors.Is(err, ErrParallelLayout) {
		t.Errorf("t = 3: err = %v, want ErrParallelLayout", err)
	}
	next := loadExample(t, "qwen3-next-80b-a3b-thinking.json")
	if _, err := RankShards(next, WeightOptions{}, ParallelLayout{TensorParallelSize: 2}, 0); !errors.Is(err, ErrParallelLayout) {
		t.Errorf("Gated DeltaNet at t = 2: err = %v, want ErrParallelLayout", err)
	}
}
