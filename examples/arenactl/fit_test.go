package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

func TestFitJSONGolden(t *testing.T) {
	for _, model := range goldenModels {
		t.Run(model, func(t *testing.T) {
			// llama fits an H200; qwen3-next's BF16 weights and deepseek-v3's
			// do not: the report is the same JSON either way.
			r := cli(t, "fit", "--config", configPath(model), "--json")
			if wantFits := model == "llama-3.1-8b"; r.code != map[bool]int{true: exitOK, false: exitNegative}[wantFits] {
				t.Fatalf("exit %d (fits: %v), stderr:\n%s", r.code, wantFits, r.stderr)
			}
			golden(t, "fit-"+model+".golden", r.stdout)
		})
	}
}

func TestFitExitStatus(t *testing.T) {
	cfg := configPath("llama-3.1-8b")
	fits := cli(t, "fit", "--config", cfg, "--json").mustSucceed(t)
	var f arena.FitReport
	if err := json.Unmarshal([]byte(fits.stdout), &f); err != nil {
		t.Fatal(err)
	}
	if !f.Fits || f.HeadroomBytes <= 0 || f.KVBlocks <= 0 || f.MaxConcurrentSeqs <= 0 || f.WeightBytes != 16060522496 {
		t.Errorf("llama-3.1-8b on an H200: fits %v, headroom %d, kv blocks %d, sequences %d, weights %d B; want it to fit with 16060522496 B of weights",
			f.Fits, f.HeadroomBytes, f.KVBlocks, f.MaxConcurrentSeqs, f.WeightBytes)
	}

	// On 24 GiB the 14.96 GiB of weights, the 2.87 GiB arena and the 1 GiB
	// reserve leave 2.77 GiB: less than one 32768-token sequence (4 GiB).
	short := cli(t, "fit", "--config", cfg, "--device-memory", "24GiB")
	if short.code != exitNegative {
		t.Fatalf("does not fit: exit %d, want %d; stderr:\n%s", short.code, exitNegative, short.stderr)
	}
	for _, want := range []string{"DOES NOT FIT", "shortfall                 1317745050 B", "largest items", "weights.mlp",
		"--max-batch-tokens 4606", "--max-seq-len 22704", "--gpu-memory-utilization 0.9512", "--logits-rows sampled"} {
		if !strings.Contains(short.stdout, want) {
			t.Errorf("fit report lacks %q:\n%s", want, short.stdout)
		}
	}
	if !strings.Contains(short.stderr, "does not fit: short by") || strings.Count(short.stderr, "arenactl: ") != 1 {
		t.Errorf("stderr: want one line saying it does not fit, got:\n%s", short.stderr)
	}

	shortJSON := cli(t, "fit", "--config", cfg, "--device-memory", "24GiB", "--json")
	if shortJSON.code != exitNegative {
		t.Fatalf("--json, does not fit: exit %d, want %d", shortJSON.code, exitNegative)
	}
	f = arena.FitReport{}
	if err := json.Unmarshal([]byte(shortJSON.stdout), &f); err != nil {
		t.Fatal(err)
	}
	want := arena.FitSuggestions{MaxBatchTokens: 4606, MaxSeqLen: 22704, GPUMemoryUtilization: 0.9512, LogitsRows: arena.LogitsSampled}
	if f.Fits || f.ShortfallBytes != 1317745050 || len(f.Largest) != 3 || f.Largest[0].Name != "weights.mlp" || f.Suggestions == nil || *f.Suggestions != want {
		t.Errorf("does not fit: got fits %v, shortfall %d, largest %+v, suggestions %+v", f.Fits, f.ShortfallBytes, f.Largest, f.Suggestions)
	}
}

func TestFitFlags(t *testing.T) {
	cfg := configPath("qwen3-next-80b-a3b-thinking")
	// 148 GiB of BF16 weights do not fit an H200; as FP8 they do.
	if r := cli(t, "fit", "--config", cfg); r.code != exitNegative {
		t.Fatalf("bf16 weights on an H200: exit %d, want %d", r.code, exitNegative)
	}
	r := cli(t, "fit", "--config", cfg, "--weight-dtype", "fp8", "--json").mustSucceed(t)
	var f arena.FitReport
	if err := json.Unmarshal([]byte(r.stdout), &f); err != nil {
		t.Fatal(err)
	}
	if !f.Fits || f.ReserveBytes != arena.DefaultReserveBytes {
		t.Errorf("fp8 weights: fits %v, reserve %d", f.Fits, f.ReserveBytes)
	}
	bad := cli(t, "fit", "--config", cfg, "--weight-dtype", "int3")
	if bad.code != exitFailure || !strings.Contains(bad.stderr, "--weight-dtype") {
		t.Errorf("--weight-dtype int3: exit %d, stderr %q", bad.code, bad.stderr)
	}
}

// TestUnsetAndZeroFlags: an unset flag is arena's default, a given 0 is 0,
// as in the API: --reserve (1 GiB; 0 reserves nothing),
// --gpu-memory-utilization (0.9), --k-max (3; 0 is no speculative decoding).
func TestUnsetAndZeroFlags(t *testing.T) {
	cfg := configPath("llama-3.1-8b")
	fitTests := []struct {
		name        string
		args        []string
		wantReserve int64
		wantUtil    float64
		wantBudget  int64
	}{
		{"unset", nil, 1 << 30, 0.9, 135_098_892_288}, // ⌊0.9 × 150,109,880,320 B⌋, an H200's total
		{"reserve 0 is none", []string{"--reserve", "0"}, 0, 0.9, 135_098_892_288},
		{"reserve 512MiB", []string{"--reserve", "512MiB"}, 512 << 20, 0.9, 135_098_892_288},
		{"utilization 1", []string{"--gpu-memory-utilization", "1"}, 1 << 30, 1, 150_109_880_320},
	}
	for _, tt := range fitTests {
		t.Run("fit "+tt.name, func(t *testing.T) {
			r := cli(t, append([]string{"fit", "--config", cfg, "--json"}, tt.args...)...).mustSucceed(t)
			var f arena.FitReport
			if err := json.Unmarshal([]byte(r.stdout), &f); err != nil {
				t.Fatal(err)
			}
			if f.ReserveBytes != tt.wantReserve || f.GPUMemoryUtilization != tt.wantUtil || f.BudgetBytes != tt.wantBudget {
				t.Errorf("reserve %d B, utilization %g, budget %d B; want %d B, %g, %d B",
					f.ReserveBytes, f.GPUMemoryUtilization, f.BudgetBytes, tt.wantReserve, tt.wantUtil, tt.wantBudget)
			}
		})
	}
	planTests := []struct {
		name     string
		args     []string
		wantKMax int64
	}{
		{"unset", nil, 3},
		{"0 is no speculative decoding", []string{"--k-max", "0"}, 0},
		{"5", []string{"--k-max", "5"}, 5},
	}
	for _, tt := range planTests {
		t.Run("plan k_max "+tt.name, func(t *testing.T) {
			r := cli(t, append([]string{"plan", "--config", cfg, "--json"}, tt.args...)...).mustSucceed(t)
			var p struct {
				Options struct {
					KMax *int64 `json:"k_max"`
				} `json:"options"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
				t.Fatal(err)
			}
			if p.Options.KMax == nil || *p.Options.KMax != tt.wantKMax {
				t.Errorf("k_max %v, want %d", p.Options.KMax, tt.wantKMax)
			}
		})
	}
}

// TestFitCUDAGraphsFlag: gpt-oss-20b as vLLM 0.19 ran it on an H100
// (docs/fit-accuracy.md, row gpt-oss-20b-h100-v0.19-8k). With
// --cuda-graphs after_kv_cache its graphs (1,511,438,080 B) join the
// context reserve and the sampler warm-up outside the budget, which lacks
// 746,734,672 B: it does not fit, as vLLM ran out of memory. With none the
// 1 GiB reserve stands for the graphs and it fits; estimated takes the
// graphs out of the KV cache instead.
func TestFitCUDAGraphsFlag(t *testing.T) {
	base := []string{"fit", "--config", configPath("gpt-oss-20b"), "--device-memory", "85029615042B", "--gpu-memory-utilization", "0.95",
		"--max-seq-len", "8192", "--max-batch-tokens", "8192", "--max-batch-size", "1024", "--k-max", "0", "--logits-rows", "sampled",
		"--utilization-scope", "instance", "--sampler-warmup", "after_kv_cache", "--mxfp4-backend", "triton"}
	const graphs = 1_511_438_080
	reports := map[string]arena.FitReport{}
	for mode, code := range map[string]int{"none": exitOK, "after_kv_cache": exitNegative, "estimated": exitOK} {
		r := cli(t, slices.Concat(base, []string{"--cuda-graphs", mode, "--json"})...)
		if r.code != code {
			t.Fatalf("--cuda-graphs %s: exit %d, want %d; stderr:\n%s", mode, r.code, code, r.stderr)
		}
		var f arena.FitReport
		if err := json.Unmarshal([]byte(r.stdout), &f); err != nil {
			t.Fatal(err)
		}
		reports[mode] = f
	}
	none, after, est := reports["none"], reports["after_kv_cache"], reports["estimated"]
	switch {
	case none.CUDAGraphs != arena.CUDAGraphsNone || none.CUDAGraphBytes != 0 || none.ReserveBytes != arena.DefaultReserveBytes:
		t.Errorf("none: %q, %d B of graphs, reserve %d B", none.CUDAGraphs, none.CUDAGraphBytes, none.ReserveBytes)
	case after.CUDAGraphBytes != graphs || after.ReserveBytes != arena.DefaultContextReserveBytes || after.ShortfallBytes != 746_734_672:
		t.Errorf("after_kv_cache: %d B of graphs, reserve %d B, shortfall %d B", after.CUDAGraphBytes, after.ReserveBytes, after.ShortfallBytes)
	case est.CUDAGraphBytes != graphs || est.KVBudgetBytes != none.KVBudgetBytes-graphs:
		t.Errorf("estimated: %d B of graphs, KV budget %d B (none: %d B)", est.CUDAGraphBytes, est.KVBudgetBytes, none.KVBudgetBytes)
	}

	text := cli(t, slices.Concat(base, []string{"--cuda-graphs", "after_kv_cache"})...)
	for _, want := range []string{"DOES NOT FIT", "cuda graphs", "1511438080 B", "captured after the KV cache is sized, outside the budget",
		"83 piecewise (25 pieces each) and 83 full captures up to 1024 tokens", "outside the budget", "shortfall                 746734672 B"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("text report lacks %q:\n%s", want, text.stdout)
		}
	}
	bad := cli(t, slices.Concat(base, []string{"--cuda-graphs", "auto"})...)
	if bad.code != exitFailure || !strings.Contains(bad.stderr, "--cuda-graphs") {
		t.Errorf("--cuda-graphs auto: exit %d, stderr %q", bad.code, bad.stderr)
	}
}
