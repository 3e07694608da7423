package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// TestPlaceGolden: DeepSeek-V3's best three layouts on 8xh200, with their
// per-rank breakdown.
func TestPlaceGolden(t *testing.T) {
	r := cli(t, "place", "--config", configPath("deepseek-v3"), "--devices", "8xh200", "--top", "3").mustSucceed(t)
	golden(t, "place-deepseek-v3.golden", r.stdout)
}

func TestPlaceJSON(t *testing.T) {
	r := cli(t, "place", "--config", configPath("llama-3.1-8b"), "--devices", "2xh100-80gb", "--json").mustSucceed(t)
	var ps []arena.Placement
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatal(err)
	}
	// t = 1, then t = 2, p = 2 and d = 2 on two GPUs.
	if len(ps) != 4 || ps[0].Layout.GPUs() != 1 || ps[0].Fit.KVTokens <= 0 {
		t.Fatalf("%d placements: %+v", len(ps), ps)
	}
	// On two GPUs t = 2 holds the most tokens (half the weights and half
	// the KV heads per rank); two replicas hold twice one GPU's.
	if ps[1].Layout.TensorParallelSize != 2 {
		t.Errorf("second %v, want t = 2", ps[1].Layout)
	}
	for i, p := range ps[1:] {
		if p.Fit.GPUs != 2 || i > 0 && p.Fit.KVTokens > ps[i].Fit.KVTokens {
			t.Errorf("%v on %d GPUs with %d tokens after %d", p.Layout, p.Fit.GPUs, p.Fit.KVTokens, ps[i].Fit.KVTokens)
		}
		if p.Layout.DataParallelSize == 2 && p.Fit.KVTokens != 2*ps[0].Fit.KVTokens {
			t.Errorf("d = 2: %d tokens, want %d", p.Fit.KVTokens, 2*ps[0].Fit.KVTokens)
		}
	}
}

func TestPlaceErrors(t *testing.T) {
	r := cli(t, "place", "--config", configPath("llama-3.1-8b"), "--devices", "8xh300")
	if r.code != exitFailure || !strings.Contains(r.stderr, "--devices") || !strings.Contains(r.stderr, "h200") {
		t.Errorf("8xh300: exit %d, stderr %q", r.code, r.stderr)
	}
	// 1.4 TB of BF16 weights fit no layout of two L4s.
	r = cli(t, "place", "--config", configPath("deepseek-v3"), "--devices", "2xl4", "--weight-dtype", "bf16")
	if r.code != exitNegative || !strings.Contains(r.stdout, "0 layouts fit") {
		t.Errorf("2xl4: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestFitParallel checks fit's vLLM layout flags: per-rank KV heads, the
// divisibility error naming the numbers, the "use t = 4" suggestion.
func TestFitParallel(t *testing.T) {
	for tp, heads := range map[string]int64{"2": 4, "4": 2, "8": 1} {
		r := cli(t, "fit", "--config", configPath("llama-3.1-8b"), "--tensor-parallel-size", tp, "--json").mustSucceed(t)
		var f arena.RankFitReport
		if err := json.Unmarshal([]byte(r.stdout), &f); err != nil {
			t.Fatal(err)
		}
		for _, rk := range f.Ranks {
			if rk.KVHeads != heads || rk.Report.KV.BytesPerToken != 32*2*heads*128*2 {
				t.Errorf("t = %s rank %d: %d KV heads, %d B per token", tp, rk.Rank, rk.KVHeads, rk.Report.KV.BytesPerToken)
			}
		}
	}
	bad := cli(t, "fit", "--config", configPath("llama-3.1-8b"), "--tensor-parallel-size", "3")
	if bad.code != exitFailure || !strings.Contains(bad.stderr, "--tensor-parallel-size") || !strings.Contains(bad.stderr, "num_attention_heads 32") {
		t.Errorf("t = 3: exit %d, stderr %q", bad.code, bad.stderr)
	}
	short := cli(t, "fit", "--config", configPath("qwen3-next-80b-a3b-thinking"), "--device", "h100-80gb", "--tensor-parallel-size", "2")
	if short.code != exitNegative || !strings.Contains(short.stdout, "--tensor-parallel-size 4") {
		t.Errorf("t = 2 on H100s: exit %d, stdout:\n%s", short.code, short.stdout)
	}
	ep := cli(t, "fit", "--config", configPath("deepseek-v3"), "--data-parallel-size", "8", "--enable-expert-parallel").mustSucceed(t)
	if !strings.Contains(ep.stdout, "FITS: deepseek_v3") || !strings.Contains(ep.stdout, "t=1 p=1 d=8 ep") {
		t.Errorf("DeepSeek-V3 DP8 EP:\n%s", ep.stdout)
	}
	model := cli(t, "fit", "--model", "testdata", "--tensor-parallel-size", "2")
	if model.code != exitFailure || !strings.Contains(model.stderr, "not per rank") {
		t.Errorf("--model with t = 2: exit %d, stderr %q", model.code, model.stderr)
	}
}
