package arena

import (
	"errors"
	"testing"
)

func TestParseMachine(t *testing.T) {
	tests := []struct {
		in    string
		count int64
		name  string
	}{
		{"8xh200", 8, "h200"},
		{" 4XH100-80GB ", 4, "h100-80gb"},
		{"2×a100_80gb", 2, "a100-80gb"},
		{"h200", 1, "h200"},
		{"72xh200", 72, "h200"},
	}
	for _, tt := range tests {
		m, err := ParseMachine(tt.in)
		if err != nil || m.Count != tt.count || m.Preset.Name != tt.name {
			t.Errorf("ParseMachine(%q) = %v, %v; want %dx%s", tt.in, m, err, tt.count, tt.name)
		}
	}
	for _, in := range []string{"", "0xh200", "8xh300", "x", "2000xh200", "73xh200", "-1xh200", "8x"} {
		if _, err := ParseMachine(in); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("ParseMachine(%q): %v, want an *OptionError", in, err)
		}
	}
}

// FuzzParseMachine: any input parses to a valid machine or an *OptionError.
func FuzzParseMachine(f *testing.F) {
	for _, s := range []string{"8xh200", "h100-80gb", "3×l4", "x", "99999999999999999999xh200"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMachine(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("ParseMachine(%q): %v", s, err)
			}
			return
		}
		if m.Count < 1 || m.Count > MaxHostDevices || m.Preset.TotalBytes <= 0 {
			t.Fatalf("ParseMachine(%q) = %+v", s, m)
		}
	})
}

// TestPlaceDeepSeekV3: DeepSeek-V3 (FP8, ~690 GB) needs six H200s at
// least; every placement listed fits on every rank, ranked by GPUs then
// KV tokens, and the DP+EP layout over all eight is among them.
func TestPlaceDeepSeekV3(t *testing.T) {
	cfg := loadExample(t, "deepseek-v3.json")
	m, err := ParseMachine("8xh200")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := Place(cfg, Options{}, m, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 || ps[0].Fit.GPUs != 6 {
		t.Fatalf("%d placements, the first on %v GPUs; want 6", len(ps), ps)
	}
	var dpep *RankFitReport
	for i, p := range ps {
		if !p.Fit.Fits || p.Fit.GPUs != p.Layout.GPUs() {
			t.Errorf("%v: %d GPUs, fits %v", p.Layout, p.Fit.GPUs, p.Fit.Fits)
		}
		for _, r := range p.Fit.Ranks {
			if !r.Report.Fits || r.Report.KVBlocks < p.Fit.KVBlocks {
				t.Errorf("%v rank %d: fits %v, %d blocks < layout's %d", p.Layout, r.Rank, r.Report.Fits, r.Report.KVBlocks, p.Fit.KVBlocks)
			}
		}
		if i > 0 {
			q := ps[i-1].Fit
			if p.Fit.GPUs < q.GPUs || p.Fit.GPUs == q.GPUs && p.Fit.KVTokens > q.KVTokens {
				t.Errorf("%v (%d GPUs, %d tokens) ranked after %v (%d, %d)", p.Layout, p.Fit.GPUs, p.Fit.KVTokens, ps[i-1].Layout, q.GPUs, q.KVTokens)
			}
		}
		if p.Layout == (ParallelLayout{TensorParallelSize: 1, PipelineParallelSize: 1, DataParallelSize: 8, EnableExpertParallel: true}) {
			dpep = p.Fit
		}
	}
	if dpep == nil {
		t.Fatalf("no d = 8 expert-parallel layout among %d", len(ps))
	}
	// Each DP rank holds its own requests' KV: eight replicas' tokens.
	if dpep.KVTokens != dpep.KVBlocks*16*8 || dpep.Ranks[7].Experts != 32 {
		t.Errorf("DP+EP: %d tokens of %d blocks, rank 7 holds %d experts", dpep.KVTokens, dpep.KVBlocks, dpep.Ranks[7].Experts)
	}
}

// TestPlaceLlamaOneGPU: Llama-3.1-8B fits one H200, so the one-GPU
// layout comes first, with Fit's numbers.
func TestPlaceLlamaOneGPU(t *testing.T) {
	cfg := loadExample(t, "llama-3.1-8b.json")
	ps, err := Place(cfg, Options{}, Machine{Count: 4, Preset: devicePresets[1]}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 || ps[0].Fit.GPUs != 1 {
		t.Fatalf("first placement %+v, want one GPU", ps)
	}
	plan, _ := PlanFor(cfg, Options{})
	r, err := Fit(plan, cfg, DeviceMemory{TotalBytes: H200TotalBytes, FreeBytes: H200TotalBytes}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ps[0].Fit; got.KVBlocks != r.KVBlocks || got.KVTokens != r.KVTokens || got.MaxConcurrentSeqs != r.MaxConcurrentSeqs {
		t.Errorf("one GPU: %d blocks %d tokens %d seqs; Fit: %d %d %d", got.KVBlocks, got.KVTokens, got.MaxConcurrentSeqs, r.KVBlocks, r.KVTokens, r.MaxConcurrentSeqs)
	}
	// t = 3 does not split 32 heads: never listed.
	for _, p := range ps {
		if p.Layout.TensorParallelSize == 3 {
			t.Errorf("listed %v", p.Layout)
		}
	}
}

func BenchmarkPlaceDeepSeekV3(b *testing.B) {
	cfg := loadExample(b, "deepseek-v3.json")
	m := Machine{Count: 8, Preset: devicePresets[1]}
	for b.Loop() {
		if _, err := Place(cfg, Options{}, m, FitOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
