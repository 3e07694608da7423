package arena

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestPlanRanksOneGPUIsPlanFor: the one-GPU layout gives exactly the
// one-device API's numbers for every example config.
func TestPlanRanksOneGPUIsPlanFor(t *testing.T) {
	for _, path := range exampleConfigs(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			cfg := loadExample(t, name)
			for _, layout := range []ParallelLayout{{}, {TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 1}} {
				ranks, err := PlanRanks(cfg, Options{}, WeightOptions{}, layout)
				if err != nil {
					t.Fatalf("PlanRanks(%v): %v", layout, err)
				}
				if len(ranks) != 1 {
					t.Fatalf("%d ranks, want 1", len(ranks))
				}
				plan, err := PlanFor(cfg, Options{})
				if err != nil {
					t.Fatal(err)
				}
				w, err := EstimateWeights(cfg, WeightOptions{})
				if err != nil {
					t.Fatal(err)
				}
				kv, err := NewKVLayoutFor(cfg, Options{})
				if err != nil {
					t.Fatal(err)
				}
				r := ranks[0]
				if !reflect.DeepEqual(r.Plan, plan) {
					t.Errorf("plan differs: total %d, want %d", r.Plan.TotalBytes, plan.TotalBytes)
				}
				if !reflect.DeepEqual(r.Weights, w) {
					t.Errorf("weights differ: %d B, want %d B", r.Weights.Bytes, w.Bytes)
				}
				if !reflect.DeepEqual(r.KV, kv) {
					t.Errorf("kv differs: %+v, want %+v", r.KV, kv)
				}
			}
		})
	}
}

// TestPlanRanksKVPerRank checks the worked KV numbers per rank.
func TestPlanRanksKVPerRank(t *testing.T) {
	tests := []struct {
		config        string
		layout        ParallelLayout
		bytesPerToken int64
		kvHeads       int64
	}{
		// MLA: 61 layers × (512 + 64) × 2 B, the latent replicated on every rank.
		{"deepseek-v3.json", ParallelLayout{TensorParallelSize: 8}, 70_272, 0},
		// 12 full-attention layers × 2 × 1 KV head × 256 × 2 B (2 KV heads over 4 ranks: one each).
		{"qwen3-next-80b-a3b-thinking.json", ParallelLayout{TensorParallelSize: 4}, 12_288, 1},
		// 32 layers × 2 × (8 / t) heads × 128 × 2 B.
		{"llama-3.1-8b.json", ParallelLayout{TensorParallelSize: 2}, 32 * 2 * 4 * 128 * 2, 4},
		{"llama-3.1-8b.json", ParallelLayout{TensorParallelSize: 4}, 32 * 2 * 2 * 128 * 2, 2},
		{"llama-3.1-8b.json", ParallelLayout{TensorParallelSize: 8}, 32 * 2 * 1 * 128 * 2, 1},
		// Pipeline: 32 layers over 4 stages, 8 each.
		{"llama-3.1-8b.json", ParallelLayout{PipelineParallelSize: 4}, 8 * 2 * 8 * 128 * 2, 8},
	}
	for _, tt := range tests {
		t.Run(tt.config+" "+tt.layout.String(), func(t *testing.T) {
			ranks, err := PlanRanks(loadExample(t, tt.config), Options{}, WeightOptions{}, tt.layout)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(ranks)) != tt.layout.GPUs() {
				t.Fatalf("%d ranks, want %d", len(ranks), tt.layout.GPUs())
			}
			for _, r := range ranks {
				if r.KV.BytesPerToken != tt.bytesPerToken || r.KVHeads != tt.kvHeads {
					t.Errorf("rank %d: %d B per token, %d KV heads; want %d B, %d", r.Rank, r.KV.BytesPerToken, r.KVHeads, tt.bytesPerToken, tt.kvHeads)
				}
			}
		})
	}
}

// TestPlanRanksTensorSplit checks Llama-3.1-8B's weights and buffers
// under TP: projections / t, the embedding and lm_head / t, norms
// replicated, logits gathered on rank 0.
func TestPlanRanksTensorSplit(t *testing.T) {
	cfg := loadExample(t, "llama-3.1-8b.json")
	one, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ranks, err := PlanRanks(cfg, Options{}, WeightOptions{}, ParallelLayout{TensorParallelSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	groups := func(r *WeightReport) map[string]int64 {
		m := map[string]int64{}
		for _, g := range r.Groups {
			m[g.Name] = g.Bytes
		}
		return m
	}
	full := groups(one)
	for _, r := range ranks {
		g := groups(r.Weights)
		for _, name := range []string{"attention", "mlp", "embedding", "lm_head"} {
			if g[name]*4 != full[name] {
				t.Errorf("rank %d %s: %d B × 4 ≠ %d B", r.Rank, name, g[name], full[name])
			}
		}
		if g["norms"] != full["norms"] {
			t.Errorf("rank %d norms: %d B, want replicated %d B", r.Rank, g["norms"], full["norms"])
		}
		// Llama's vocabulary 128256 is a multiple of 64: 32064 rows per rank.
		if r.VocabShard != 32064 || r.AttentionHeads != 8 {
			t.Errorf("rank %d: vocab shard %d, heads %d; want 32064, 8", r.Rank, r.VocabShard, r.AttentionHeads)
		}
		logits := r.Plan.Buffers[Logits]
		want := []int64{8192, 32064}
		if r.TP == 0 {
			want = []int64{8192, 128256}
		}
		if !reflect.DeepEqual(logits.Shape, want) {
			t.Errorf("rank %d logits %v, want %v", r.Rank, logits.Shape, want)
		}
		if err := r.Plan.Validate(); err != nil {
			t.Errorf("rank %d plan: %v", r.Rank, err)
		}
	}
}

// TestPlanRanksPipeline checks vLLM's layer partition and where the
// embedding, final norm, lm_head and logits go.
func TestPlanRanksPipeline(t *testing.T) {
	cfg := loadExample(t, "deepseek-v3.json") // 61 layers
	ranks, err := PlanRanks(cfg, Options{}, WeightOptions{}, ParallelLayout{PipelineParallelSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	// get_pp_indices(61, r, 4): 15 each, the remainder on the second-to-last.
	want := [][2]int64{{0, 15}, {15, 30}, {30, 46}, {46, 61}}
	for i, r := range ranks {
		if got := [2]int64{r.FirstLayer, r.EndLayer}; got != want[i] {
			t.Errorf("stage %d layers %v, want %v", i, got, want[i])
		}
		has := map[string]bool{}
		for _, w := range r.Weights.Tensors {
			has[w.Name] = true
		}
		if has["embed_tokens"] != (i == 0) || has["lm_head"] != (i == 3) || has["norm"] != (i == 3) {
			t.Errorf("stage %d: embed %v lm_head %v norm %v", i, has["embed_tokens"], has["lm_head"], has["norm"])
		}
		if absent := r.Plan.Buffers[Logits].Absent != ""; absent != (i != 3) {
			t.Errorf("stage %d: logits absent %v", i, absent)
		}
	}
	if got := ranks[0].KV.PagedLayers; got != 15 {
		t.Errorf("stage 0 caches %d layers, want 15", got)
	}
}

// TestPPLayers checks get_pp_indices's remainder rule.
func TestPPLayers(t *testing.T) {
	tests := []struct {
		n, p int64
		want []int64
	}{
		{32, 4, []int64{8, 8, 8, 8}},
		{61, 2, []int64{31, 30}},
		{7, 4, []int64{2, 2, 2, 1}},
		{5, 4, []int64{1, 1, 2, 1}},
	}
	for _, tt := range tests {
		var got []int64
		var next int64
		for r := range tt.p {
			s, e := ppLayers(tt.n, r, tt.p)
			if s != next {
				t.Errorf("ppLayers(%d, %d, %d) starts at %d, want %d", tt.n, r, tt.p, s, next)
			}
			next = e
			got = append(got, e-s)
		}
		if !reflect.DeepEqual(got, tt.want) || next != tt.n {
			t.Errorf("ppLayers(%d, ·, %d) = %v, want %v", tt.n, tt.p, got, tt.want)
		}
	}
}

// TestPlanRanksExpertParallel checks DeepSeek-V3 with data-parallel
// attention and expert parallelism over 8 GPUs: 32 routed experts of
// 256 per rank, attention whole on every rank.
func TestPlanRanksExpertParallel(t *testing.T) {
	cfg := loadExample(t, "deepseek-v3.json")
	one, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ranks, err := PlanRanks(cfg, Options{}, WeightOptions{}, ParallelLayout{DataParallelSize: 8, EnableExpertParallel: true})
	if err != nil {
		t.Fatal(err)
	}
	var experts, attn int64
	for _, g := range one.Groups {
		switch g.Name {
		case "moe_experts":
			experts = g.Bytes
		case "attention":
			attn = g.Bytes
		}
	}
	for _, r := range ranks {
		if r.Experts != 32 || r.DP != r.Rank || r.EP != r.Rank {
			t.Errorf("rank %d: %d experts, dp %d, ep %d", r.Rank, r.Experts, r.DP, r.EP)
		}
		for _, g := range r.Weights.Groups {
			if g.Name == "moe_experts" && g.Bytes*8 != experts {
				t.Errorf("rank %d experts %d B × 8 ≠ %d B", r.Rank, g.Bytes, experts)
			}
			if g.Name == "attention" && g.Bytes != attn {
				t.Errorf("rank %d attention %d B, want all of %d B", r.Rank, g.Bytes, attn)
			}
		}
		if r.KV.BytesPerToken != 70_272 {
			t.Errorf("rank %d: %d B per token", r.Rank, r.KV.BytesPerToken)
		}
	}
	// 10 experts over 4 EP ranks: 3, 3, 2, 2.
	for r, want := range []int64{3, 3, 2, 2} {
		if got := localExperts(10, int64(r), 4); got != want {
			t.Errorf("localExperts(10, %d, 4) = %d, want %d", r, got, want)
		}
	}
}

// TestPlanRanksErrors checks the typed errors naming the numbers.
func TestPlanRanksErrors(t *testing.T) {
	llama := loadExample(t, "llama-3.1-8b.json")
	_, err := PlanRanks(llama, Options{}, WeightOptions{}, ParallelLayout{TensorParallelSize: 3})
	var pe *ParallelError
	if !errors.As(err, &pe) || !errors.Is(err, ErrParallelLayout) {
		t.Fatalf("t = 3: %v, want a *ParallelError", err)
	}
	if pe.Option != "tensor_parallel_size" || pe.Size != 3 || pe.Field != "num_attention_heads" || pe.Count != 32 {
		t.Errorf("t = 3: %+v", pe)
	}
	for _, want := range []string{"3", "32", "[1 2 4 8 16 32]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// t = 16 is a multiple of the 8 KV heads: each is replicated on 2 ranks.
	if _, err := PlanRanks(llama, Options{}, WeightOptions{}, ParallelLayout{TensorParallelSize: 16}); err != nil {
		t.Errorf("t = 16 (KV heads replicated): %v", err)
	}
	if _, err := PlanRanks(llama, Options{}, WeightOptions{}, ParallelLayout{PipelineParallelSize: 33}); !errors.As(err, &pe) || pe.Field != "num_hidden_layers" {
		t.Errorf("p = 33: %v", err)
	}
	if _, err := PlanRanks(llama, Options{}, WeightOptions{}, ParallelLayout{TensorParallelSize: -1}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("t = -1: %v", err)
	}
	if _, err := PlanRanks(loadExample(t, "deepseek-v4-flash.json"), Options{}, WeightOptions{}, ParallelLayout{TensorParallelSize: 2}); !errors.Is(err, ErrParallelLayout) {
		t.Errorf("DeepSeek-V4 t = 2: %v", err)
	}
	if _, err := PlanRanks(nil, Options{}, WeightOptions{}, ParallelLayout{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil config: %v", err)
	}
}
