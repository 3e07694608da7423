package arena

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
)

// simH200Bytes is the simulated H200's capacity (gpuworker.H200Bytes, which
// arena's tests cannot import).
const simH200Bytes = 141 << 30

// kvFitExample fits one example config with default options on a free
// device of total bytes.
func kvFitExample(t testing.TB, name string, total int64) (*ModelConfig, *FitReport) {
	t.Helper()
	cfg, plan := planExample(t, name, Options{})
	fit, err := Fit(plan, cfg, DeviceMemory{TotalBytes: total, FreeBytes: total}, FitOptions{})
	if err != nil {
		t.Fatalf("Fit(%s): %v", name, err)
	}
	return cfg, fit
}

// groupNames is the names of gs, in order.
func groupNames(gs []KVCacheGroup) []string {
	var names []string
	for _, g := range gs {
		names = append(names, g.Name)
	}
	return names
}

// TestKVCacheSpecEqualsFit: for every example config, on the simulated
// H200 when it fits there (else on a device large enough), the spec with
// the fit's counts is the fit's KV memory to the byte, and one with fewer
// blocks and sequences is blocks × bytes_per_block + seqs ×
// fixed_bytes_per_seq.
func TestKVCacheSpecEqualsFit(t *testing.T) {
	onH200 := 0
	for _, path := range exampleConfigs(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			cfg, fit := kvFitExample(t, name, simH200Bytes)
			if !fit.Fits {
				cfg, fit = kvFitExample(t, name, 8<<40)
			} else {
				onH200++
			}
			if !fit.Fits {
				t.Fatalf("%s does not fit on 8 TiB either", name)
			}
			t.Logf("%s on %d B: %d blocks, %d sequences, %d B", name, fit.Device.TotalBytes, fit.KVBlocks, fit.StateSeqs, fit.KVCacheBytes+fit.StateCacheBytes)
			s, err := NewKVCacheSpec(cfg, fit, KVCacheRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if want := fit.KVCacheBytes + fit.StateCacheBytes; s.Bytes != want {
				t.Fatalf("spec holds %d B, the fit's KV memory is %d B (kv %d + state %d)", s.Bytes, want, fit.KVCacheBytes, fit.StateCacheBytes)
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			if s.Counts.Blocks != fit.KVBlocks {
				t.Fatalf("blocks %d, fit %d", s.Counts.Blocks, fit.KVBlocks)
			}
			blocks, seqs := max(fit.KVBlocks/3, 1), max(fit.StateSeqs/2, 1)
			fewer, err := NewKVCacheSpec(cfg, fit, KVCacheRequest{Blocks: &blocks, Seqs: &seqs})
			if err != nil {
				t.Fatal(err)
			}
			hasSeqs := fit.FixedBytesPerSeq > 0
			want := blocks*fit.KV.BytesPerBlock + seqs*fit.FixedBytesPerSeq
			if !hasSeqs {
				want = blocks * fit.KV.BytesPerBlock
			}
			if fewer.Bytes != want || fewer.Validate() != nil {
				t.Fatalf("fewer: %d B (%v), want %d B", fewer.Bytes, fewer.Validate(), want)
			}
		})
	}
	if onH200 < 8 {
		t.Fatalf("only %d example configs fit on the simulated H200", onH200)
	}
}

// TestKVCacheGroupsByHand checks layouts worked out by hand from the
// configs, with the default kv_cache_dtype (BF16) and
// mamba_ssm_cache_dtype (auto: F32 for Mamba-2, the model dtype for GDN).
func TestKVCacheGroupsByHand(t *testing.T) {
	const b = 16
	layout := func(cfg *ModelConfig) KVLayout {
		l, err := NewKVLayout(cfg, b)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("llama-3.1-8b", func(t *testing.T) {
		cfg := loadExample(t, "llama-3.1-8b.json")
		gs, err := KVCacheGroups(cfg, layout(cfg), KVCacheCounts{Blocks: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(groupNames(gs), []string{KVGroupFullAttention}) || len(gs[0].Layers) != 32 {
			t.Fatalf("groups %v", groupNames(gs))
		}
		// Hkv 8, D 128, BF16: a head 256 B, a token 2 KiB, a block 32 KiB per plane.
		l := gs[0].Layers[5]
		want := KVCacheLayer{Layer: 5, Offset: 5 * 2 * 10 * 32768, Bytes: 2 * 10 * 32768, Planes: 2, BlockStride: 32768,
			PlaneStride: 10 * 32768, EntriesPerBlock: 16, CompressRatio: 1, EntryStride: 2048, Heads: 8, HeadDim: 128, HeadStride: 256, ElementBytes: 2}
		if !equalLayer(l, want) || gs[0].Bytes != 32*2*10*32768 {
			t.Fatalf("layer 5 = %+v, want %+v; group %d B", l, want, gs[0].Bytes)
		}
	})
	t.Run("gpt-oss-20b", func(t *testing.T) {
		cfg := loadExample(t, "gpt-oss-20b.json")
		gs, err := KVCacheGroups(cfg, layout(cfg), KVCacheCounts{Blocks: 7, SlidingBlocks: 9})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(groupNames(gs), []string{KVGroupFullAttention, KVGroupSlidingWindow}) {
			t.Fatalf("groups %v", groupNames(gs))
		}
		// layer_types alternate sliding, full: full layers odd, sliding even;
		// Hkv 8, D 64: a token 1 KiB per plane, a block 16 KiB.
		for gi, first := range []int64{1, 0} {
			g := gs[gi]
			if len(g.Layers) != 12 || g.Layers[0].Layer != first || g.Layers[11].Layer != first+22 {
				t.Fatalf("%s covers %d layers from %d", g.Name, len(g.Layers), g.Layers[0].Layer)
			}
			if l := g.Layers[0]; l.Planes != 2 || l.EntryStride != 1024 || l.BlockStride != 16384 || l.PlaneStride != g.Blocks*16384 {
				t.Fatalf("%s layer = %+v", g.Name, l)
			}
		}
	})
	t.Run("qwen3-next-80b", func(t *testing.T) {
		cfg := loadExample(t, "qwen3-next-80b-a3b-thinking.json")
		gs, err := KVCacheGroups(cfg, layout(cfg), KVCacheCounts{Blocks: 4, Slots: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(groupNames(gs), []string{KVGroupFullAttention, KVGroupGDNState}) {
			t.Fatalf("groups %v", groupNames(gs))
		}
		// full_attention_interval 4: layers 3, 7, …, 47; Hkv 2, D 256.
		if full := gs[0].Layers; len(full) != 12 || full[0].Layer != 3 || full[11].Layer != 47 || full[0].EntryStride != 1024 {
			t.Fatalf("full attention layers %+v", full[0])
		}
		// GDN: conv [3, 2·16·128 + 32·128] BF16 = 49,152 B; SSM [32, 128,
		// 128] in the model dtype (vLLM's mamba_ssm_cache_dtype auto for
		// GDN), BF16: 1 MiB.
		st := gs[1]
		l := st.Layers[1]
		if len(st.Layers) != 36 || l.Layer != 1 || l.ConvBytes != 49152 || l.SSMBytes != 1<<20 || l.SSMElementBytes != 2 ||
			!slices.Equal(l.ConvShape, []int64{3, 8192}) || !slices.Equal(l.SSMShape, []int64{32, 128, 128}) ||
			l.BlockStride != 49152+1<<20 || l.Offset != 3*(49152+1<<20) || st.Blocks != 3 {
			t.Fatalf("GDN layer 1 = %+v", l)
		}
	})
	t.Run("nemotron-h-8b", func(t *testing.T) {
		cfg := loadExample(t, "nemotron-h-8b-base-8k.json")
		gs, err := KVCacheGroups(cfg, layout(cfg), KVCacheCounts{Blocks: 2, Slots: 5})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(groupNames(gs), []string{KVGroupFullAttention, KVGroupMamba2State}) {
			t.Fatalf("groups %v", groupNames(gs))
		}
		// Mamba-2: d_inner 128·64 = 8192, conv [3, 8192 + 2·8·128] BF16 =
		// 61,440 B; SSM [128, 64, 128] F32 = 4 MiB. Pattern "M-M-M-M*-…": 4
		// attention layers, the first at 7; Mamba layers at even indices.
		m := gs[1].Layers[0]
		if len(gs[0].Layers) != 4 || gs[0].Layers[0].Layer != 7 || m.Layer != 0 || m.ConvBytes != 61440 || m.SSMBytes != 4<<20 ||
			gs[1].Bytes != int64(len(gs[1].Layers))*5*(61440+4<<20) {
			t.Fatalf("attention %d layers from %d; mamba layer %+v", len(gs[0].Layers), gs[0].Layers[0].Layer, m)
		}
	})
	t.Run("deepseek-v3", func(t *testing.T) {
		cfg := loadExample(t, "deepseek-v3.json")
		gs, err := KVCacheGroups(cfg, layout(cfg), KVCacheCounts{Blocks: 3})
		if err != nil {
			t.Fatal(err)
		}
		// One latent of 512 + 64 per token: 1,152 B; a block 18,432 B.
		l := gs[0].Layers[60]
		if !slices.Equal(groupNames(gs), []string{KVGroupMLA}) || len(gs[0].Layers) != 61 || l.Planes != 1 ||
			l.HeadDim != 576 || l.EntryStride != 1152 || l.BlockStride != 18432 || l.PlaneStride != 0 || l.Offset != 60*3*18432 {
			t.Fatalf("groups %v, layer 60 %+v", groupNames(gs), l)
		}
	})
	t.Run("deepseek-v4-flash", func(t *testing.T) {
		cfg := loadExample(t, "deepseek-v4-flash.json")
		lay := layout(cfg)
		gs, err := KVCacheGroups(cfg, lay, KVCacheCounts{Blocks: 2, SlidingBlocks: 9, Slots: 4})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(groupNames(gs), []string{KVGroupCompressed, KVGroupSlidingWindow, KVGroupCompressorState}) {
			t.Fatalf("groups %v", groupNames(gs))
		}
		// compress_ratios [0, 0, 4, 128, 4, …, 4, 0] over 43 layers: layers
		// 2..42 compressed (the 44th entry is the MTP layer's), every layer
		// keeps a window of one 512-wide latent.
		c, w := gs[0].Layers, gs[1].Layers
		if len(c) != 41 || c[0].Layer != 2 || c[0].CompressRatio != 4 || c[0].EntriesPerBlock != 4 || c[0].HeadDim != 512+128 ||
			c[1].CompressRatio != 128 || c[1].EntriesPerBlock != 1 || c[1].HeadDim != 512 || len(w) != 43 || w[0].EntryStride != 1024 {
			t.Fatalf("compressed %+v %+v; sliding %d layers", c[0], c[1], len(w))
		}
		st := gs[2]
		if len(st.Layers) != 41 || st.Bytes != 4*lay.CompressorStateBytesPerSeq {
			t.Fatalf("compressor state %d layers, %d B, want 4 × %d", len(st.Layers), st.Bytes, lay.CompressorStateBytesPerSeq)
		}
	})
}

// equalLayer compares two layers, shapes included.
func equalLayer(a, b KVCacheLayer) bool {
	return slices.Equal(a.ConvShape, b.ConvShape) && slices.Equal(a.SSMShape, b.SSMShape) &&
		a.Layer == b.Layer && a.Offset == b.Offset && a.Bytes == b.Bytes && a.Planes == b.Planes && a.BlockStride == b.BlockStride &&
		a.PlaneStride == b.PlaneStride && a.EntriesPerBlock == b.EntriesPerBlock && a.CompressRatio == b.CompressRatio &&
		a.EntryStride == b.EntryStride && a.Heads == b.Heads && a.HeadDim == b.HeadDim && a.HeadStride == b.HeadStride &&
		a.ElementBytes == b.ElementBytes && a.ConvBytes == b.ConvBytes && a.SSMElementBytes == b.SSMElementBytes && a.SSMBytes == b.SSMBytes
}

// TestKVCacheSpecBadInput: counts out of range, a fit of another model and
// overflow are typed errors, never a panic.
func TestKVCacheSpecBadInput(t *testing.T) {
	cfg, fit := kvFitExample(t, "gpt-oss-20b.json", simH200Bytes)
	big, bigFit := kvFitExample(t, "qwen3-32b.json", simH200Bytes)
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name     string
		cfg      *ModelConfig
		fit      *FitReport
		req      KVCacheRequest
		mismatch bool
	}{
		{"zero blocks", cfg, fit, KVCacheRequest{Blocks: n(0)}, false},
		{"negative blocks", cfg, fit, KVCacheRequest{Blocks: n(-4)}, false},
		{"more blocks than the fit", cfg, fit, KVCacheRequest{Blocks: n(fit.KVBlocks + 1)}, false},
		{"zero seqs", cfg, fit, KVCacheRequest{Seqs: n(0)}, false},
		{"more seqs than the fit", cfg, fit, KVCacheRequest{Seqs: n(fit.StateSeqs + 1)}, false},
		{"nil fit", cfg, nil, KVCacheRequest{}, false},
		{"fit of another model_type", big, fit, KVCacheRequest{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewKVCacheSpec(c.cfg, c.fit, c.req)
			var ke *KVCacheError
			if s != nil || !errors.As(err, &ke) || !errors.Is(err, ErrKVCacheSpec) || errors.Is(err, ErrKVCacheMismatch) != c.mismatch {
				t.Fatalf("NewKVCacheSpec = %v, %v; want a *KVCacheError (mismatch %v)", s, err, c.mismatch)
			}
		})
	}
	t.Run("fit of another model of the same model_type", func(t *testing.T) {
		small := loadExample(t, "qwen3-8b.json")
		if _, err := NewKVCacheSpec(small, bigFit, KVCacheRequest{}); !errors.Is(err, ErrKVCacheMismatch) {
			t.Fatalf("qwen3-8b with qwen3-32b's fit: %v, want ErrKVCacheMismatch", err)
		}
		if _, err := NewKVCacheSpec(big, bigFit, KVCacheRequest{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a fit that leaves no block", func(t *testing.T) {
		c, f := kvFitExample(t, "qwen3-next-80b-a3b-thinking.json", simH200Bytes)
		if f.KVBlocks != 0 {
			t.Skipf("qwen3-next fits on the simulated H200 (%d blocks)", f.KVBlocks)
		}
		var ke *KVCacheError
		if _, err := NewKVCacheSpec(c, f, KVCacheRequest{}); !errors.As(err, &ke) || ke.Field != "blocks" || ke.Mismatch {
			t.Fatalf("%v, want a *KVCacheError for blocks", err)
		}
	})
	t.Run("overflow", func(t *testing.T) {
		l, err := NewKVLayout(cfg, 16)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := KVCacheGroups(cfg, l, KVCacheCounts{Blocks: math.MaxInt64, SlidingBlocks: 1}); !errors.Is(err, ErrOverflow) {
			t.Fatalf("MaxInt64 blocks: %v, want ErrOverflow", err)
		}
	})
	t.Run("count of a kind the model does not cache", func(t *testing.T) {
		llama := loadExample(t, "llama-3.1-8b.json")
		l, err := NewKVLayout(llama, 16)
		if err != nil {
			t.Fatal(err)
		}
		var ke *KVCacheError
		if _, err := KVCacheGroups(llama, l, KVCacheCounts{Blocks: 1, Slots: 2}); !errors.As(err, &ke) || ke.Field != "slots" {
			t.Fatalf("slots for llama: %v", err)
		}
	})
	t.Run("layout of another model", func(t *testing.T) {
		l, err := NewKVLayout(big, 16)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := KVCacheGroups(cfg, l, KVCacheCounts{Blocks: 1, SlidingBlocks: 1}); !errors.Is(err, ErrKVCacheMismatch) {
			t.Fatalf("gpt-oss with qwen3-32b's layout: %v", err)
		}
	})
}

// validSpec is Qwen3-Next-80B's spec for 5 blocks and 2 sequences: a K and
// V group and a GDN state group.
func validSpec(t testing.TB) *KVCacheSpec {
	t.Helper()
	cfg, fit := kvFitExample(t, "qwen3-next-80b-a3b-thinking.json", 1<<40)
	blocks, seqs := int64(5), int64(2)
	s, err := NewKVCacheSpec(cfg, fit, KVCacheRequest{Blocks: &blocks, Seqs: &seqs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKVCacheSpecValidate: every field Validate checks, changed by hand, is
// refused with a *KVCacheError.
func TestKVCacheSpecValidate(t *testing.T) {
	if err := validSpec(t).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(s *KVCacheSpec)
	}{
		{"block_tokens", func(s *KVCacheSpec) { s.BlockTokens = 0 }},
		{"no groups", func(s *KVCacheSpec) { s.Groups = nil }},
		{"duplicate name", func(s *KVCacheSpec) { s.Groups[1].Name = s.Groups[0].Name }},
		{"zero blocks", func(s *KVCacheSpec) { s.Groups[0].Blocks = 0 }},
		{"more blocks", func(s *KVCacheSpec) { s.Groups[0].Blocks++ }},
		{"no layers", func(s *KVCacheSpec) { s.Groups[0].Layers = nil }},
		{"layers out of order", func(s *KVCacheSpec) { s.Groups[0].Layers[1].Layer = 0 }},
		{"offset", func(s *KVCacheSpec) { s.Groups[0].Layers[1].Offset++ }},
		{"layer bytes", func(s *KVCacheSpec) { s.Groups[0].Layers[0].Bytes++ }},
		{"planes", func(s *KVCacheSpec) { s.Groups[0].Layers[0].Planes = 3 }},
		{"plane stride", func(s *KVCacheSpec) { s.Groups[0].Layers[0].PlaneStride = 0 }},
		{"entry stride", func(s *KVCacheSpec) { s.Groups[0].Layers[0].EntryStride *= 2 }},
		{"head dim", func(s *KVCacheSpec) { s.Groups[0].Layers[0].HeadDim = -1 }},
		{"entries per block", func(s *KVCacheSpec) { s.Groups[0].Layers[0].EntriesPerBlock *= 2 }},
		{"group block_tokens", func(s *KVCacheSpec) { s.Groups[0].BlockTokens++ }},
		{"state group block_tokens", func(s *KVCacheSpec) { s.Groups[1].BlockTokens = s.BlockTokens }},
		{"block stride", func(s *KVCacheSpec) { s.Groups[1].Layers[0].BlockStride++ }},
		{"ssm bytes", func(s *KVCacheSpec) { s.Groups[1].Layers[0].SSMBytes++ }},
		{"negative shape", func(s *KVCacheSpec) { s.Groups[1].Layers[0].ConvShape[0] = -3 }},
		{"group bytes", func(s *KVCacheSpec) { s.Groups[1].Bytes-- }},
		{"spec bytes", func(s *KVCacheSpec) { s.Bytes++ }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := validSpec(t)
			c.change(s)
			var ke *KVCacheError
			if err := s.Validate(); !errors.As(err, &ke) || !errors.Is(err, ErrKVCacheSpec) {
				t.Fatalf("Validate = %v, want a *KVCacheError", err)
			}
		})
	}
	var nilSpec *KVCacheSpec
	if err := nilSpec.Validate(); !errors.Is(err, ErrKVCacheSpec) {
		t.Fatalf("nil spec: %v", err)
	}
}
