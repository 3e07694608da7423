package arena

import (
	"errors"
	"reflect"
	"testing"
)

// h100 is an empty H100 80GB.
var h100 = DeviceMemory{TotalBytes: 85_045_477_376, FreeBytes: 85_045_477_376}

// TestFitRanksSuggestsTensorParallel: Qwen3-Next-80B in BF16 (~160 GB)
// fits no one H100 80GB nor two; four do, and the fit says so.
func TestFitRanksSuggestsTensorParallel(t *testing.T) {
	cfg := loadExample(t, "qwen3-next-80b-a3b-thinking.json")
	r, err := FitRanks(cfg, Options{}, ParallelLayout{}, []DeviceMemory{h100}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Fits || r.Suggestions == nil || r.Suggestions.TensorParallelSize != 4 {
		t.Fatalf("fits %v, suggestions %+v; want t = 4", r.Fits, r.Suggestions)
	}
	r4, err := FitRanks(cfg, Options{}, ParallelLayout{TensorParallelSize: 4}, []DeviceMemory{h100}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r4.Fits || len(r4.Ranks) != 4 || r4.Suggestions != nil {
		t.Fatalf("t = 4: fits %v, %d ranks", r4.Fits, len(r4.Ranks))
	}
	minBlocks := r4.Ranks[0].Report.KVBlocks
	for _, rk := range r4.Ranks {
		minBlocks = min(minBlocks, rk.Report.KVBlocks)
		if rk.Report.KV.BytesPerToken != 12_288 {
			t.Errorf("rank %d: %d B per token", rk.Rank, rk.Report.KV.BytesPerToken)
		}
	}
	if r4.KVBlocks != minBlocks || r4.KVTokens != minBlocks*16 {
		t.Errorf("layout %d blocks %d tokens, ranks' minimum %d", r4.KVBlocks, r4.KVTokens, minBlocks)
	}
	// Rank 0 holds the gathered logits: fewer KV blocks than rank 1.
	if r4.Ranks[0].Report.KVBlocks >= r4.Ranks[1].Report.KVBlocks {
		t.Errorf("rank 0 %d blocks, rank 1 %d: rank 0 holds more logits", r4.Ranks[0].Report.KVBlocks, r4.Ranks[1].Report.KVBlocks)
	}
}

// TestFitRanksOneGPUIsFit: the one-GPU layout's report is Fit's.
func TestFitRanksOneGPUIsFit(t *testing.T) {
	for _, name := range []string{"llama-3.1-8b.json", "deepseek-v3.json", "nemotron-h-8b-base-8k.json"} {
		cfg := loadExample(t, name)
		plan, err := PlanFor(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := Fit(plan, cfg, h100, FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := FitRanks(cfg, Options{}, ParallelLayout{}, []DeviceMemory{h100}, FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want.Suggestions = nil
		if !reflect.DeepEqual(r.Ranks[0].Report, want) || r.Fits != want.Fits || r.KVBlocks != want.KVBlocks {
			t.Errorf("%s: FitRanks's one report differs from Fit's", name)
		}
	}
}

// TestFitRanksErrors: device counts, per-rank checkpoint sizes, bad layouts.
func TestFitRanksErrors(t *testing.T) {
	cfg := loadExample(t, "llama-3.1-8b.json")
	two := ParallelLayout{TensorParallelSize: 2}
	if _, err := FitRanks(cfg, Options{}, two, []DeviceMemory{h100, h100, h100}, FitOptions{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("3 devices for 2 ranks: %v", err)
	}
	if _, err := FitRanks(cfg, Options{}, two, nil, FitOptions{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("no devices: %v", err)
	}
	if _, err := FitRanks(cfg, Options{}, two, []DeviceMemory{{TotalBytes: 1, FreeBytes: 2}}, FitOptions{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("free > total: %v", err)
	}
	if _, err := FitRanks(cfg, Options{}, two, []DeviceMemory{h100}, FitOptions{CheckpointWeightBytes: new(int64(1))}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("checkpoint bytes on 2 GPUs: %v", err)
	}
	if _, err := FitRanks(cfg, Options{}, ParallelLayout{TensorParallelSize: 3}, []DeviceMemory{h100}, FitOptions{}); !errors.Is(err, ErrParallelLayout) {
		t.Errorf("t = 3: %v", err)
	}
	// Per-rank devices: the second rank's device is half used.
	used := h100
	used.FreeBytes = h100.TotalBytes / 2
	r, err := FitRanks(cfg, Options{}, two, []DeviceMemory{h100, used}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ranks[1].Report.Device != used || r.KVBlocks != r.Ranks[1].Report.KVBlocks {
		t.Errorf("rank 1 on %+v, layout %d blocks, rank 1 %d", r.Ranks[1].Report.Device, r.KVBlocks, r.Ranks[1].Report.KVBlocks)
	}
}

// FuzzPlanRanks: any layout of small sizes gives a plan per GPU or a
// typed error, never a panic.
func FuzzPlanRanks(f *testing.F) {
	f.Add(int64(1), int64(1), int64(1), false, uint8(0))
	f.Add(int64(8), int64(1), int64(1), false, uint8(1))
	f.Add(int64(2), int64(2), int64(2), true, uint8(2))
	names := []string{"llama-3.1-8b.json", "deepseek-v3.json", "qwen3-next-80b-a3b-thinking.json", "nemotron-h-56b-base-8k.json", "gemma-3-27b-it.json"}
	cfgs := make([]*ModelConfig, len(names))
	for i, n := range names {
		cfgs[i] = loadExample(f, n)
	}
	f.Fuzz(func(t *testing.T, tp, pp, dp int64, ep bool, which uint8) {
		l := ParallelLayout{TensorParallelSize: tp % 17, PipelineParallelSize: pp % 9, DataParallelSize: dp % 9, EnableExpertParallel: ep}
		ranks, err := PlanRanks(cfgs[int(which)%len(cfgs)], Options{MaxBatchTokens: 256}, WeightOptions{}, l)
		if err != nil {
			if !errors.Is(err, ErrParallelLayout) && !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("%v: %v", l, err)
			}
			return
		}
		if int64(len(ranks)) != l.GPUs() {
			t.Fatalf("%v: %d ranks", l, len(ranks))
		}
		for _, r := range ranks {
			if err := r.Plan.Validate(); err != nil || r.Weights.Bytes <= 0 || r.EndLayer <= r.FirstLayer {
				t.Fatalf("%v rank %d: %v, %d weight bytes, layers [%d, %d)", l, r.Rank, err, r.Weights.Bytes, r.FirstLayer, r.EndLayer)
			}
		}
	})
}

// TestFitRankExactWeights: one rank's fit with its shard's exact sizes
// holds the same weights as the layout's estimate, plus the pool's
// alignment, and the KV cache gets what the padding leaves.
func TestFitRankExactWeights(t *testing.T) {
	for _, name := range []string{"llama-3.1-8b.json", "gemma-3-27b-it.json"} {
		t.Run(name, func(t *testing.T) { testFitRankExactWeights(t, loadExample(t, name)) })
	}
}

func testFitRankExactWeights(t *testing.T, cfg *ModelConfig) {
	l := ParallelLayout{TensorParallelSize: 2}
	all, err := FitRanks(cfg, Options{}, l, []DeviceMemory{h100}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for rank := range int64(2) {
		shards, err := RankShards(cfg, WeightOptions{}, l, rank)
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int64
		for _, s := range shards {
			sizes = append(sizes, s.RankBytes())
		}
		pooled, err := PooledBytes(sizes)
		if err != nil {
			t.Fatal(err)
		}
		r, err := FitRank(cfg, Options{}, l, rank, h100, FitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		est := all.Ranks[rank].Report
		if r.CheckpointWeightBytes != est.EstimatedWeightBytes || r.WeightBytes != pooled || r.WeightPaddingBytes != pooled-est.EstimatedWeightBytes {
			t.Errorf("rank %d: weights %d (checkpoint %d + padding %d), want pooled %d of the estimate's %d",
				rank, r.WeightBytes, r.CheckpointWeightBytes, r.WeightPaddingBytes, pooled, est.EstimatedWeightBytes)
		}
		if (cfg.ModelType == "gemma3") != (r.WeightPaddingBytes > 0) || r.ArenaBytes != est.ArenaBytes || r.KVBytesPerBlock != est.KVBytesPerBlock {
			t.Errorf("rank %d: padding %d, arena %d (want %d), %d B a block (want %d)", rank, r.WeightPaddingBytes, r.ArenaBytes, est.ArenaBytes, r.KVBytesPerBlock, est.KVBytesPerBlock)
		}
		if r.KVBlocks > est.KVBlocks || r.KVBlocks < est.KVBlocks-(r.WeightPaddingBytes/r.KVBytesPerBlock+1) {
			t.Errorf("rank %d: %d KV blocks, the estimate's %d", rank, r.KVBlocks, est.KVBlocks)
		}
	}
}

func TestFitRankErrors(t *testing.T) {
	cfg := loadExample(t, "llama-3.1-8b.json")
	l := ParallelLayout{TensorParallelSize: 2}
	var oe *OptionError
	if _, err := FitRank(cfg, Options{}, l, 2, h100, FitOptions{}); !errors.As(err, &oe) || oe.Option != "rank" {
		t.Errorf("rank 2 of 2: %v, want an *OptionError for rank", err)
	}
	if _, err := FitRank(cfg, Options{}, l, 0, h100, FitOptions{CheckpointWeightBytes: new(int64(1))}); !errors.As(err, &oe) || oe.Option != "checkpoint_weight_bytes" {
		t.Errorf("checkpoint_weight_bytes set: %v, want an *OptionError", err)
	}
	if _, err := FitRank(cfg, Options{}, l, 0, h100, FitOptions{CheckpointPooledTensorBytes: []int64{1}}); !errors.As(err, &oe) || oe.Option != "checkpoint_pooled_tensor_bytes" {
		t.Errorf("checkpoint_pooled_tensor_bytes set: %v, want an *OptionError", err)
	}
	if _, err := FitRank(loadExample(t, "gpt-oss-20b.json"), Options{}, l, 0, h100, FitOptions{}); !errors.Is(err, ErrParallelLayout) {
		t.Errorf("a shard RankShards refuses: %v, want ErrParallelLayout", err)
	}
}
