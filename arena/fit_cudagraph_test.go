package arena

import (
	"slices"
	"testing"
)

// vllmServe is vLLM's server defaults on a card of 70 GiB or more: 8,192
// batched tokens and context, 1,024 sequences, no speculative tokens,
// logits for the sampled positions only.
var vllmServe = Options{MaxBatchTokens: 8192, MaxSeqLen: 8192, MaxBatchSize: 1024, KMax: new(int64(0)), LogitsRows: LogitsSampled}

// TestCUDAGraphCaptureSizes checks vLLM's capture sizes
// (VllmConfig._set_cudagraph_sizes) against the counts vLLM 0.19 logged
// in llm-d-planner's H100 runs ("Profiling CUDA graph memory:
// PIECEWISE=51 (largest=512)" for Llama-3.1-8B, "PIECEWISE=83
// (largest=1024)" for gpt-oss-20b) and against the rule's edges.
func TestCUDAGraphCaptureSizes(t *testing.T) {
	for _, c := range []struct {
		name          string
		modelType     string
		seqs, tokens  int64
		kMax          int64
		count         int
		largest       int64
		mustHave      []int64
		mustNotHave   []int64
		largestBefore int64 // the size below the largest
	}{
		{"vLLM default, 1024 sequences", "llama", 1024, 8192, 0, 51, 512, []int64{1, 2, 4, 8, 248, 256, 272}, []int64{3, 12, 264}, 496},
		{"gpt-oss raises the largest to 1024", "gpt_oss", 1024, 8192, 0, 83, 1024, []int64{1008}, nil, 1008},
		{"gpt-oss at 1024 batched tokens", "gpt_oss", 1024, 1024, 0, 83, 1024, nil, nil, 1008},
		{"128 sequences: 2 × 128", "qwen3", 128, 8192, 0, 35, 256, nil, []int64{272}, 248},
		{"8 sequences: 2 × 8", "qwen3", 8, 8192, 0, 5, 16, []int64{16}, nil, 8},
		{"100 batched tokens cap the sizes", "gpt_oss", 1024, 100, 0, 15, 96, nil, []int64{100}, 88},
		{"one speculative token doubles the decode query", "llama", 64, 8192, 1, 35, 256, nil, nil, 248},
		{"one sequence", "llama", 1, 8192, 0, 2, 2, nil, []int64{4}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := cudaGraphCaptureSizes(c.modelType, Options{MaxBatchSize: c.seqs, MaxBatchTokens: c.tokens, KMax: new(c.kMax)})
			n := len(got)
			if n != c.count || got[n-1] != c.largest || (n > 1 && got[n-2] != c.largestBefore) || !slices.IsSorted(got) {
				t.Fatalf("sizes %v: %d of them up to %d; want %d up to %d after %d", got, n, got[n-1], c.count, c.largest, c.largestBefore)
			}
			for _, s := range c.mustHave {
				if !slices.Contains(got, s) {
					t.Errorf("lacks %d: %v", s, got)
				}
			}
			for _, s := range c.mustNotHave {
				if slices.Contains(got, s) {
					t.Errorf("has %d: %v", s, got)
				}
			}
		})
	}
}

// TestCUDAGraphBytesAgainstVLLMLogs holds the estimate against the graph
// memory vLLM 0.19.0 logged on an H100 80GB ("Graph capturing finished in
// N secs, took X GiB", GPUModelRunner.capture_model's free memory before
// less after) at its server defaults and gpu_memory_utilization 0.95, in
// llm-d-planner's runs (accuracy/results/v0.19.0/logs at commit
// d3121e059da88662db39a926a3ead964be97359b). docs/fit-accuracy.md has the
// table.
func TestCUDAGraphBytesAgainstVLLMLogs(t *testing.T) {
	const base = "https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/"
	for _, c := range []struct {
		config    string
		source    string
		loggedGiB float64
		pieces    int64
		captures  int64
		low, high float64
		estimate  int64
	}{
		// 194,252,800 B of activations at 512 tokens + 51 × 33 × 192 KiB
		// + 51 × 8 MiB = 952,963,072 B, 0.888 GiB.
		{"llama-3.1-8b.json", base + "meta-llama-llama-3-1-8b--h100-80gb--tp1pp1dp1--16384.log", 0.91, 33, 51, 0.95, 1.05, 952_963_072},
		{"gemma-3-27b-it.json", base + "google-gemma-3-27b-it--h100-80gb--tp1pp1dp1--8192.log", 1.14, 63, 51, 0.95, 1.05, 0},
		// vLLM's own two-capture estimate logged 1.30 GiB: gpt-oss's
		// graphs hold 0.54 GiB that neither sees (its Triton MoE kernels).
		{"gpt-oss-20b.json", base + "openai-gpt-oss-20b--h100-80gb--tp1pp1dp1--8192.FAILED.log", 1.84, 25, 83, 0.74, 0.80, 0},
	} {
		t.Run(c.config, func(t *testing.T) {
			cfg, plan := planExample(t, c.config, vllmServe)
			r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 85_029_615_042, FreeBytes: 85_029_615_042},
				FitOptions{GPUMemoryUtilization: new(0.95), UtilizationScope: UtilizationInstance, CUDAGraphs: CUDAGraphsAfterKVCache})
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(r.CUDAGraphBytes) / (c.loggedGiB * (1 << 30))
			t.Logf("%s: estimate %d B (%.3f GiB), vLLM %.2f GiB, ratio %.3f (%s)", c.config, r.CUDAGraphBytes, float64(r.CUDAGraphBytes)/(1<<30), c.loggedGiB, ratio, c.source)
			switch {
			case r.CUDAGraphPieces != c.pieces, r.CUDAGraphPiecewiseCaptures != c.captures, r.CUDAGraphFullCaptures != c.captures:
				t.Errorf("%d pieces, %d piecewise and %d full captures; want %d, %d, %d",
					r.CUDAGraphPieces, r.CUDAGraphPiecewiseCaptures, r.CUDAGraphFullCaptures, c.pieces, c.captures, c.captures)
			case ratio < c.low || ratio > c.high:
				t.Errorf("estimate/logged = %.3f, want [%g, %g]", ratio, c.low, c.high)
			case c.estimate != 0 && r.CUDAGraphBytes != c.estimate:
				t.Errorf("estimate %d B, want %d B", r.CUDAGraphBytes, c.estimate)
			}
		})
	}
}

// cudaGraphFit fits gpt-oss-20b as vLLM 0.19 ran it on an H100
// (samplerFit's scenario, the card's 79.19 GiB as vLLM logged it) under
// the CUDA-graph mode and sampler warm-up given.
func cudaGraphFit(t *testing.T, graphs CUDAGraphs, sampler SamplerWarmup, reserve *int64) *FitReport {
	t.Helper()
	cfg, plan := planExample(t, "gpt-oss-20b.json", vllmServe)
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 85_029_615_042, FreeBytes: 85_029_615_042},
		FitOptions{GPUMemoryUtilization: new(0.95), UtilizationScope: UtilizationInstance, SamplerWarmup: sampler,
			CUDAGraphs: graphs, ReserveBytes: reserve, Weights: WeightOptions{MXFP4Backend: MXFP4Triton}})
	if err != nil {
		t.Fatalf("Fit(%s, %s): %v", graphs, sampler, err)
	}
	return r
}

// TestFitCUDAGraphs: vLLM 0.19 captured gpt-oss-20b's graphs after sizing
// its KV cache to fill 0.95 of the card and then ran out of memory
// warming up the sampler. Under after_kv_cache the graphs (1,511,438,080
// B) join the context reserve (576 MiB) and the warm-up pass
// (2,882,797,568 B) in the 4,251,480,752 B outside the budget, which lack
// 746,734,672 B; under estimated they come out of the KV cache instead;
// under none the fit is as before.
func TestFitCUDAGraphs(t *testing.T) {
	none := cudaGraphFit(t, CUDAGraphsNone, SamplerWarmupAfterKVCache, nil)
	if none.CUDAGraphs != CUDAGraphsNone || none.CUDAGraphBytes != 0 || none.ReserveBytes != DefaultReserveBytes || !none.Fits ||
		none.OutsideRequiredBytes != DefaultReserveBytes+none.SamplerPassBytes || hasNote(none.Notes, "CUDA graphs (cuda_graphs") {
		t.Fatalf("none: graphs %q %d B, reserve %d B, fits %v, outside needs %d B", none.CUDAGraphs, none.CUDAGraphBytes, none.ReserveBytes, none.Fits, none.OutsideRequiredBytes)
	}

	after := cudaGraphFit(t, CUDAGraphsAfterKVCache, SamplerWarmupAfterKVCache, nil)
	const graphs, pass, outside = 1_511_438_080, 2_882_797_568, 4_251_480_752
	need := int64(DefaultContextReserveBytes + graphs + pass)
	switch {
	case after.CUDAGraphBytes != graphs, after.CUDAGraphLargestCapture != 1024, after.ReserveBytes != DefaultContextReserveBytes:
		t.Errorf("after_kv_cache: graphs %d B up to %d tokens, reserve %d B", after.CUDAGraphBytes, after.CUDAGraphLargestCapture, after.ReserveBytes)
	case after.OutsideBudgetBytes != outside, after.OutsideRequiredBytes != need:
		t.Errorf("after_kv_cache: outside %d B must hold %d B; want %d B and %d B", after.OutsideBudgetBytes, after.OutsideRequiredBytes, outside, need)
	case after.Fits, after.ShortfallBytes != need-outside:
		t.Errorf("after_kv_cache: fits %v, shortfall %d B; want short by %d B", after.Fits, after.ShortfallBytes, need-outside)
	case after.Suggestions == nil || after.Suggestions.GPUMemoryUtilization != 0.9412:
		// ⌊(85,029,615,042 − 4,998,215,424) × 10^4 / 85,029,615,042⌋ = 9,412:
		// the highest utilization that leaves the graphs their room.
		t.Errorf("after_kv_cache: suggestions %+v, want gpu_memory_utilization 0.9412", after.Suggestions)
	case after.KVBudgetBytes != none.KVBudgetBytes, after.RequiredBytes != none.RequiredBytes:
		t.Errorf("after_kv_cache: KV budget %d B, required %d B: the graphs outside the budget must not move them (%d, %d)",
			after.KVBudgetBytes, after.RequiredBytes, none.KVBudgetBytes, none.RequiredBytes)
	case !hasNote(after.Notes, "captured after the KV cache is sized"),
		!hasNote(after.Notes, "the reserve 603979776 B, the CUDA graphs 1511438080 B and the sampler warm-up pass 2882797568 B, 4998215424 B in all"),
		!hasNote(after.Notes, "vLLM runs out of memory after sizing its KV cache"), !hasNote(after.Notes, "the CUDA graphs are sized on their own"):
		t.Errorf("after_kv_cache notes: %q", after.Notes)
	}

	est := cudaGraphFit(t, CUDAGraphsEstimated, SamplerWarmupAfterKVCache, nil)
	switch {
	case est.CUDAGraphBytes != graphs, est.KVBudgetBytes != none.KVBudgetBytes-graphs, est.RequiredBytes != none.RequiredBytes+graphs:
		t.Errorf("estimated: graphs %d B, KV budget %d B, required %d B; want the graphs out of the KV budget (%d B)",
			est.CUDAGraphBytes, est.KVBudgetBytes, est.RequiredBytes, none.KVBudgetBytes-graphs)
	case est.OutsideRequiredBytes != DefaultContextReserveBytes+pass, !est.Fits:
		t.Errorf("estimated: outside needs %d B, fits %v", est.OutsideRequiredBytes, est.Fits)
	case !slices.Contains(est.Largest, FitItem{Name: "cuda_graphs", Kind: "cuda_graphs", Bytes: graphs}):
		t.Errorf("estimated: largest %+v lacks the graphs", est.Largest)
	case !hasNote(est.Notes, "counted inside the budget"):
		t.Errorf("estimated notes: %q", est.Notes)
	}

	// A reserve that is set is kept: the logged context (0.51 GiB) alone.
	ctx := int64(547_608_330)
	if r := cudaGraphFit(t, CUDAGraphsAfterKVCache, SamplerWarmupAfterKVCache, &ctx); r.ReserveBytes != ctx || r.OutsideRequiredBytes != ctx+graphs+pass || r.Fits {
		t.Errorf("set reserve: %d B, outside needs %d B, fits %v", r.ReserveBytes, r.OutsideRequiredBytes, r.Fits)
	}
	// gpuarena's own sampling keeps the reserve inside: outside holds the graphs alone.
	if r := cudaGraphFit(t, CUDAGraphsAfterKVCache, SamplerWarmupNone, nil); r.OutsideRequiredBytes != graphs || !r.Fits ||
		r.KVBudgetBytes != cudaGraphFit(t, CUDAGraphsNone, SamplerWarmupNone, nil).KVBudgetBytes+DefaultReserveBytes-DefaultContextReserveBytes {
		t.Errorf("sampler none: outside needs %d B (want %d), fits %v, KV budget %d B", r.OutsideRequiredBytes, graphs, r.Fits, r.KVBudgetBytes)
	}
}

// TestFitCUDAGraphsFullCaptures: FULL graphs only for uniform decode
// batches of up to max_batch_size × (1 + k_max) tokens
// (GPUModelRunner.capture_model): 100 sequences keep 15 of gpt-oss's 83
// sizes.
func TestFitCUDAGraphsFullCaptures(t *testing.T) {
	o := vllmServe
	o.MaxBatchSize = 100
	cfg, plan := planExample(t, "gpt-oss-120b.json", o)
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: 1 << 40, FreeBytes: 1 << 40}, FitOptions{CUDAGraphs: CUDAGraphsEstimated})
	if err != nil {
		t.Fatal(err)
	}
	want := r.CUDAGraphActivationBytes + 83*37*CUDAGraphPieceBytes + 15*CUDAGraphFullBytes
	if r.CUDAGraphPiecewiseCaptures != 83 || r.CUDAGraphFullCaptures != 15 || r.CUDAGraphPieces != 37 || r.CUDAGraphBytes != want {
		t.Errorf("captures %d piecewise (%d pieces), %d full, %d B; want 83 (37), 15, %d B",
			r.CUDAGraphPiecewiseCaptures, r.CUDAGraphPieces, r.CUDAGraphFullCaptures, r.CUDAGraphBytes, want)
	}
}

// TestParseCUDAGraphs accepts the three values and "" and refuses others.
func TestParseCUDAGraphs(t *testing.T) {
	for in, want := range map[string]CUDAGraphs{"": CUDAGraphsNone, "none": CUDAGraphsNone,
		"after_kv_cache": CUDAGraphsAfterKVCache, "estimated": CUDAGraphsEstimated} {
		if got, err := ParseCUDAGraphs(in); err != nil || got != want {
			t.Errorf("ParseCUDAGraphs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseCUDAGraphs("auto"); !isOption(err, "cuda_graphs") {
		t.Errorf("unknown value: %v", err)
	}
	if _, err := Fit(planFor(t, "qwen3-8b.json"), loadExample(t, "qwen3-8b.json"), DeviceMemory{TotalBytes: 1 << 40, FreeBytes: 1 << 40},
		FitOptions{CUDAGraphs: "piecewise"}); !isOption(err, "cuda_graphs") {
		t.Errorf("Fit with an unknown cuda_graphs: %v", err)
	}
}
