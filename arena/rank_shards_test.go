package arena

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// shardOf is rank's shard of the tensor called name.
func shardOf(t *testing.T, cfg *ModelConfig, l ParallelLayout, rank int64, name string) TensorShard {
	t.Helper()
	return shardOfWith(t, cfg, WeightOptions{}, l, rank, name)
}

// shardOfWith is shardOf with the weight options wopts.
func shardOfWith(t *testing.T, cfg *ModelConfig, wopts WeightOptions, l ParallelLayout, rank int64, name string) TensorShard {
	t.Helper()
	shards, err := RankShards(cfg, wopts, l, rank)
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
// 128256, 151936, 129280 and 131072 are multiples of 64).
func TestRankShardsSumToPlanRanks(t *testing.T) {
	fp8 := WeightOptions{DType: FP8}
	for _, c := range []struct {
		config string
		wopts  WeightOptions
		l      ParallelLayout
	}{
		{"llama-3.1-8b.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 2}},
		{"llama-3.1-8b.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 4, PipelineParallelSize: 2}},
		{"qwen3-30b-a3b.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 2, DataParallelSize: 2, EnableExpertParallel: true}},
		{"qwen3-30b-a3b.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 4}},
		{"deepseek-v3.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 8}}, // FP8 scales sliced in blocks
		{"qwen3-next-80b-a3b-thinking.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 2}},
		{"qwen3-next-80b-a3b-thinking.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 4, EnableExpertParallel: true}},
		{"nemotron-3-nano-30b-a3b.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 2}},
		{"nemotron-3-nano-30b-a3b.json", WeightOptions{}, ParallelLayout{TensorParallelSize: 4}},
		{"nemotron-h-56b-base-8k.json", fp8, ParallelLayout{TensorParallelSize: 2}}, // Mamba-2 in_proj scales in sections
	} {
		name := fmt.Sprintf("%s/%s", c.config, c.l)
		if c.wopts.DType != 0 {
			name += "/" + c.wopts.DType.String()
		}
		t.Run(name, func(t *testing.T) {
			checkShardSums(t, c.config, loadExample(t, c.config), c.wopts, c.l)
		})
	}
}

// checkShardSums checks that ranks' shards of cfg (called name) under l
// hold what PlanRanks counts and read what they hold but a vocabulary
// shard's padding rows: the first and last
// ranks (they hold the embedding and the LM head), every rank for small
// layouts, and under -race the last rank alone for large ones
// (DeepSeek-V3's listing of tens of thousands of tensors costs seconds a
// rank there).
func checkShardSums(t *testing.T, name string, cfg *ModelConfig, wopts WeightOptions, l ParallelLayout) {
	t.Helper()
	ranks, err := PlanRanks(cfg, Options{}, wopts, l)
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
		shards, err := RankShards(cfg, wopts, l, int64(r))
		if err != nil {
			t.Fatal(err)
		}
		var held, read, pad int64
		for _, s := range shards {
			held += s.RankBytes()
			read += s.FileBytes()
			if s.Kind == ShardRows && s.RankShape[0] > s.Len { // a vocabulary shard's padding rows
				pad += (s.RankShape[0] - s.Len) * (s.RankBytes() / s.RankShape[0])
			}
		}
		if held != ranks[r].Weights.CheckpointBytes || read+pad != held {
			t.Errorf("%s %s rank %d: holds %d B, reads %d B and pads %d B; PlanRanks %d B", name, l, r, held, read, pad, ranks[r].Weights.CheckpointBytes)
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
	oss := loadExample(t, "gpt-oss-20b.json")
	if _, err := RankShards(oss, WeightOptions{}, ParallelLayout{TensorParallelSize: 2}, 0); !errors.Is(err, ErrParallelLayout) {
		t.Errorf("stacked experts split by width at t = 2: err = %v, want ErrParallelLayout", err)
	}
}

// loadTiny loads a tiny test config of internal/modelgen/testdata.
func loadTiny(t *testing.T, name string) *ModelConfig {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join("..", "internal", "modelgen", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Hand-worked slices of the Gated DeltaNet and Mamba-2 mixers.
// tiny-qwen3-next: nk 4, nv 8, dk = dv = 32, so key_dim 128, value_dim
// 256: in_proj_qkvz 768 rows, in_proj_ba 16, conv1d [512, 1, 4] (q, k, v
// sections of 128, 128, 256), dt_bias and A_log [8], norm [32], out_proj
// [256, 256]. tiny-nemotron-h: d_inner 256, n_groups 2 × d_state 16, 8
// heads: in_proj 584 rows (gate 256, x 256, B 32, C 32, dt 8), conv1d
// [320, 1, 4] and bias [320] (x, B, C); with n_groups 1, B and C are 16
// rows each and every rank holds them.
func TestRankShardsMixersByHand(t *testing.T) {
	next, nem := loadTiny(t, "tiny-qwen3-next.json"), loadTiny(t, "tiny-nemotron-h.json")
	one := *nem
	m := *nem.Mamba
	m.NumGroups = 1
	one.Mamba = &m
	fp8 := loadExample(t, "nemotron-h-56b-base-8k.json")
	tp := func(n int64) ParallelLayout { return ParallelLayout{TensorParallelSize: n} }
	rows := func(rs ...int64) []RowRange {
		var out []RowRange
		for i := 0; i < len(rs); i += 2 {
			out = append(out, RowRange{rs[i], rs[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		cfg        *ModelConfig
		wopts      WeightOptions
		l          ParallelLayout
		rank       int64
		name       string
		kind       ShardKind
		start, len int64
		sections   []RowRange
		rankShape  []int64
	}{
		{next, WeightOptions{}, tp(2), 1, "model.layers.0.linear_attn.in_proj_qkvz.weight", ShardRows, 384, 384, nil, []int64{384, 256}}, // groups 2 and 3
		{next, WeightOptions{}, tp(2), 1, "model.layers.1.linear_attn.in_proj_ba.weight", ShardRows, 8, 8, nil, []int64{8, 256}},
		{next, WeightOptions{}, tp(2), 0, "model.layers.0.linear_attn.conv1d.weight", ShardSections, 0, 0, rows(0, 64, 128, 64, 256, 128), []int64{256, 1, 4}},
		{next, WeightOptions{}, tp(2), 1, "model.layers.0.linear_attn.conv1d.weight", ShardSections, 0, 0, rows(64, 64, 192, 64, 384, 128), []int64{256, 1, 4}},
		{next, WeightOptions{}, tp(4), 3, "model.layers.2.linear_attn.conv1d.weight", ShardSections, 0, 0, rows(96, 32, 224, 32, 448, 64), []int64{128, 1, 4}},
		{next, WeightOptions{}, tp(2), 1, "model.layers.0.linear_attn.dt_bias", ShardRows, 4, 4, nil, []int64{4}},
		{next, WeightOptions{}, tp(4), 2, "model.layers.0.linear_attn.A_log", ShardRows, 4, 2, nil, []int64{2}},
		{next, WeightOptions{}, tp(2), 1, "model.layers.0.linear_attn.norm.weight", ShardWhole, 0, 0, nil, []int64{32}},
		{next, WeightOptions{}, tp(2), 1, "model.layers.0.linear_attn.out_proj.weight", ShardCols, 128, 128, nil, []int64{256, 128}},
		{next, WeightOptions{}, tp(2), 0, "model.layers.0.linear_attn.conv1d.weight", ShardSections, 0, 0, rows(0, 64, 128, 64, 256, 128), []int64{256, 1, 4}},
		{next, WeightOptions{}, ParallelLayout{PipelineParallelSize: 2}, 1, "model.layers.0.linear_attn.conv1d.weight", ShardAbsent, 0, 0, nil, nil},
		{next, WeightOptions{}, tp(2), 1, "lm_head.weight", ShardRows, 512, 488, nil, []int64{512, 256}}, // vocab 1000 padded to 1024
		{nem, WeightOptions{}, tp(2), 0, "backbone.layers.0.mixer.in_proj.weight", ShardSections, 0, 0, rows(0, 128, 256, 128, 512, 16, 544, 16, 576, 4), []int64{292, 256}},
		{nem, WeightOptions{}, tp(2), 1, "backbone.layers.0.mixer.in_proj.weight", ShardSections, 0, 0, rows(128, 128, 384, 128, 528, 16, 560, 16, 580, 4), []int64{292, 256}},
		{nem, WeightOptions{}, tp(2), 1, "backbone.layers.0.mixer.conv1d.weight", ShardSections, 0, 0, rows(128, 128, 272, 16, 304, 16), []int64{160, 1, 4}},
		{nem, WeightOptions{}, tp(2), 0, "backbone.layers.0.mixer.conv1d.bias", ShardSections, 0, 0, rows(0, 128, 256, 16, 288, 16), []int64{160}},
		{nem, WeightOptions{}, tp(2), 1, "backbone.layers.0.mixer.D", ShardRows, 4, 4, nil, []int64{4}},
		{nem, WeightOptions{}, tp(2), 1, "backbone.layers.0.mixer.norm.weight", ShardRows, 128, 128, nil, []int64{128}},
		{nem, WeightOptions{}, tp(2), 1, "backbone.layers.0.mixer.out_proj.weight", ShardCols, 128, 128, nil, []int64{256, 128}},
		{nem, WeightOptions{}, tp(2), 1, "backbone.layers.0.norm.weight", ShardWhole, 0, 0, nil, []int64{256}},
		// n_groups 1: B and C (16 rows each) whole on every rank, merged.
		{&one, WeightOptions{}, tp(2), 1, "backbone.layers.0.mixer.in_proj.weight", ShardSections, 0, 0, rows(128, 128, 384, 160, 548, 4), []int64{292, 256}}, // x, B, C adjacent
		{&one, WeightOptions{}, tp(2), 1, "backbone.layers.0.mixer.conv1d.weight", ShardRows, 128, 160, nil, []int64{160, 1, 4}},
		{&one, WeightOptions{}, tp(2), 0, "backbone.layers.0.mixer.conv1d.bias", ShardSections, 0, 0, rows(0, 128, 256, 32), []int64{160}},
		// Nemotron-H-56B in FP8 (d_inner 16384, groups 2048, 256 heads):
		// in_proj's 37120 rows are 290 blocks of 128, each section's
		// blocks ÷ 2.
		{fp8, WeightOptions{DType: FP8}, tp(2), 1, "backbone.layers.0.mixer.in_proj.weight_scale_inv", ShardSections, 0, 0, rows(64, 64, 192, 64, 264, 8, 280, 8, 289, 1), []int64{145, 64}},
	} {
		s := shardOfWith(t, c.cfg, c.wopts, c.l, c.rank, c.name)
		if s.Kind != c.kind || s.Start != c.start || s.Len != c.len || !slices.Equal(s.Sections, c.sections) || !slices.Equal(s.RankShape, c.rankShape) {
			t.Errorf("%s %s rank %d: %v [%d, +%d) sections %v shape %v; want %v [%d, +%d) sections %v shape %v",
				c.name, c.l, c.rank, s.Kind, s.Start, s.Len, s.Sections, s.RankShape, c.kind, c.start, c.len, c.sections, c.rankShape)
		}
		var read int64
		for i, r := range s.ByteRanges() {
			read += r.Bytes
			if c.kind == ShardSections {
				row := shapeBytes(s.DType, s.Shape) / s.Shape[0]
				if want := (ByteRange{c.sections[i].Start * row, c.sections[i].Len * row}); r != want {
					t.Errorf("%s rank %d: byte range %d is %v, want %v", c.name, c.rank, i, r, want)
				}
			}
		}
		if want := s.RankBytes(); c.name != "lm_head.weight" && read != want {
			t.Errorf("%s rank %d: reads %d B, holds %d B", c.name, c.rank, read, want)
		}
	}
	for _, l := range []ParallelLayout{tp(2), tp(4), {TensorParallelSize: 2, PipelineParallelSize: 2}} {
		checkShardSums(t, "tiny-qwen3-next.json", next, WeightOptions{}, l)
	}
	checkShardSums(t, "tiny-nemotron-h.json", nem, WeightOptions{}, tp(2))
	checkShardSums(t, "tiny-nemotron-h.json with n_groups 1", &one, WeightOptions{}, tp(2))
}

// Mixer splits that vLLM refuses or arena cannot make are errors naming
// the tensor: FP8 Mamba-2 sections off the 128-row blocks, a section t
// does not divide.
func TestRankShardsMixerErrors(t *testing.T) {
	nem := loadTiny(t, "tiny-nemotron-h.json")
	_, err := RankShards(nem, WeightOptions{DType: FP8}, ParallelLayout{TensorParallelSize: 2}, 1)
	var pe *ParallelError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "mixer.in_proj.weight_scale_inv") {
		t.Errorf("FP8 tiny Nemotron-H at t = 2: err = %v, want a *ParallelError naming in_proj's scale", err)
	}
	if _, _, err := sectionRows("x.weight", 3, 0, section{rows: 8}); !errors.As(err, &pe) || !strings.Contains(pe.Reason, "x.weight") {
		t.Errorf("8 rows over 3 ranks: err = %v, want a *ParallelError naming the tensor", err)
	}
}
