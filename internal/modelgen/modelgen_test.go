package modelgen

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
)

// TestGenerate writes a 2-layer Llama-shaped and a 2-layer Qwen3-MoE-shaped
// model, reopens each with checkpoint.Open and checks: the names, dtypes and
// shapes are the listing's; TotalBytes is the estimate for 2 layers; every
// tensor's CRC-32C read back equals the manifest's; config.json says 2
// layers and loads as the model the checkpoint is.
func TestGenerate(t *testing.T) {
	tests := []struct {
		config     string
		shardBytes int64
		// tensors and bytes worked out by hand for 2 layers.
		tensors int
		bytes   int64
		files   int
	}{
		// embed and lm_head 1024×256, 2 × (2 norms 256, q 256×256, k, v
		// 64×256, o 256×256, gate, up, down 896×256), norm 256; BF16:
		// (2·262144 + 2·(512 + 65536 + 2·16384 + 65536 + 3·229376) + 256)·2.
		{config: "tiny-llama.json", tensors: 21, bytes: 2 * (2*262144 + 2*(512+65536+2*16384+65536+3*229376) + 256), files: 1},
		// per layer 2 norms, q/k/v/o (q 256×256, k/v 64×256, o 256×256),
		// q_norm/k_norm 32, router 8×256, 8 experts × 3 × 96×256; sharded in 1 MB.
		{config: "tiny-qwen3-moe.json", shardBytes: 1_000_000, tensors: 2*(2+6+1+8*3) + 3,
			bytes: 2 * (2*262144 + 2*(512+65536+2*16384+65536+64+2048+24*24576) + 256), files: 5},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			r := ForTest(t, filepath.Join("testdata", tt.config), Options{Seed: 7, Layers: 2, ShardBytes: tt.shardBytes})
			if r.Layers != 2 || len(r.Tensors) != tt.tensors || r.EstimatedBytes != tt.bytes ||
				r.Manifest.TotalBytes != tt.bytes || len(r.Manifest.Files) != tt.files {
				t.Fatalf("layers %d, tensors %d, estimate %d B, written %d B in %d files; want 2, %d, %d B, %d files",
					r.Layers, len(r.Tensors), r.EstimatedBytes, r.Manifest.TotalBytes, len(r.Manifest.Files), tt.tensors, tt.bytes, tt.files)
			}
			ck, err := checkpoint.Open(r.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if ck.TotalBytes() != r.EstimatedBytes {
				t.Errorf("checkpoint %d B, estimate %d B", ck.TotalBytes(), r.EstimatedBytes)
			}
			var got, want []string
			for _, tn := range ck.Tensors() {
				got = append(got, tn.Name)
			}
			for _, s := range r.Tensors {
				want = append(want, s.Name)
				tn, ok := ck.Tensor(s.Name)
				if !ok || tn.DType != s.DType || !slices.Equal(tn.Shape, s.Shape) {
					t.Errorf("%s: file has %v %v (found %v), listing %v %v", s.Name, tn.DType, tn.Shape, ok, s.DType, s.Shape)
					continue
				}
				sum, err := ck.Checksum(s.Name)
				if err != nil || sum != r.Manifest.Checksums[s.Name] {
					t.Errorf("%s: checksum %08x (%v), manifest %08x", s.Name, sum, err, r.Manifest.Checksums[s.Name])
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("names differ:\n file    %v\n listing %v", got, want)
			}
			cfg, err := arena.LoadConfig(r.Dir)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.NumLayers != 2 {
				t.Errorf("config.json has %d layers, want 2", cfg.NumLayers)
			}
			est, err := arena.EstimateWeights(cfg, arena.WeightOptions{})
			if err != nil || est.Bytes != ck.TotalBytes() {
				t.Errorf("the folder's config estimates %d B (%v), its checkpoint holds %d B", est.Bytes, err, ck.TotalBytes())
			}
		})
	}
}

// TestGenerateNemotronH: --layers cuts hybrid_override_pattern with
// num_hidden_layers ("M*-E" → "M*-"), and the folder is the 3-block model:
// a Mamba-2 mixer, attention and an MLP under backbone.layers.N.mixer, no
// MoE tensor.
func TestGenerateNemotronH(t *testing.T) {
	r := ForTest(t, filepath.Join("testdata", "tiny-nemotron-h.json"), Options{Layers: 3})
	cfg, err := arena.LoadConfig(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumLayers != 3 || cfg.Counts.Mamba2 != 1 || cfg.Counts.FullAttention != 1 || cfg.Counts.DenseMLP != 1 || cfg.Counts.MoE != 0 {
		t.Fatalf("config.json: %d layers, counts %+v; want M, *, -", cfg.NumLayers, cfg.Counts)
	}
	ck, err := checkpoint.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, name := range []string{"backbone.layers.0.mixer.A_log", "backbone.layers.1.mixer.q_proj.weight",
		"backbone.layers.2.mixer.up_proj.weight", "backbone.norm_f.weight"} {
		if _, ok := ck.Tensor(name); !ok {
			t.Errorf("%s is missing", name)
		}
	}
	if _, ok := ck.Tensor("backbone.layers.3.norm.weight"); ok {
		t.Error("block 3 was written")
	}
	if ck.TotalBytes() != r.EstimatedBytes || ck.Len() != len(r.Tensors) {
		t.Errorf("checkpoint %d B, %d tensors; estimate %d B, listing %d", ck.TotalBytes(), ck.Len(), r.EstimatedBytes, len(r.Tensors))
	}
}

// TestGenerateQwen3Next: the tiny Qwen3-Next is three Gated DeltaNet
// layers and one gated attention layer (full_attention_interval 4), each
// with its MoE, written under model.layers.N.linear_attn and self_attn
// with the shapes of modeling_qwen3_next.py: in_proj_qkvz [2·4·32 +
// 2·8·32, 256], conv1d [2·4·32 + 8·32, 1, 4], q_proj [2·8·32, 256]
// (query and gate).
func TestGenerateQwen3Next(t *testing.T) {
	r := ForTest(t, filepath.Join("testdata", "tiny-qwen3-next.json"), Options{Seed: 2})
	cfg, err := arena.LoadConfig(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumLayers != 4 || cfg.Counts.GDN != 3 || cfg.Counts.FullAttention != 1 || cfg.Counts.MoE != 4 {
		t.Fatalf("config.json: %d layers, counts %+v; want 3 GDN and 1 attention layer, 4 MoE", cfg.NumLayers, cfg.Counts)
	}
	ck, err := checkpoint.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for name, shape := range map[string][]int64{
		"model.layers.0.linear_attn.in_proj_qkvz.weight": {768, 256},
		"model.layers.2.linear_attn.conv1d.weight":       {512, 1, 4},
		"model.layers.1.linear_attn.A_log":               {8},
		"model.layers.3.self_attn.q_proj.weight":         {512, 256},
		"model.layers.3.mlp.shared_expert_gate.weight":   {1, 256},
		"lm_head.weight": {1000, 256},
	} {
		if tn, ok := ck.Tensor(name); !ok || !slices.Equal(tn.Shape, shape) {
			t.Errorf("%s: %v (found %v), want %v", name, tn.Shape, ok, shape)
		}
	}
	if _, ok := ck.Tensor("model.layers.3.linear_attn.in_proj_qkvz.weight"); ok {
		t.Error("the attention layer has a Gated DeltaNet")
	}
	if ck.TotalBytes() != r.EstimatedBytes || ck.Len() != len(r.Tensors) {
		t.Errorf("checkpoint %d B, %d tensors; estimate %d B, listing %d", ck.TotalBytes(), ck.Len(), r.EstimatedBytes, len(r.Tensors))
	}
}

// TestGenerateGptOSS: --layers cuts layer_types with num_hidden_layers,
// and the MXFP4 experts are written as gpt-oss stores them: per layer
// gate_up_proj_blocks U8 [E, 2·I, H/32, 16] and _scales U8 [E, 2·I, H/32].
func TestGenerateGptOSS(t *testing.T) {
	r := ForTest(t, filepath.Join("testdata", "tiny-gpt-oss.json"), Options{Layers: 2})
	cfg, err := arena.LoadConfig(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumLayers != 2 || cfg.Counts.SlidingAttention != 1 || cfg.Counts.FullAttention != 1 {
		t.Fatalf("config.json: %d layers, counts %+v; want sliding then full", cfg.NumLayers, cfg.Counts)
	}
	ck, err := checkpoint.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, w := range []struct {
		name  string
		dtype checkpoint.DType
		shape []int64
	}{
		{"model.layers.1.mlp.experts.gate_up_proj_blocks", checkpoint.U8, []int64{4, 512, 8, 16}},
		{"model.layers.1.mlp.experts.gate_up_proj_scales", checkpoint.U8, []int64{4, 512, 8}},
		{"model.layers.1.mlp.experts.down_proj_blocks", checkpoint.U8, []int64{4, 256, 8, 16}},
		{"model.layers.1.mlp.experts.down_proj_bias", checkpoint.BF16, []int64{4, 256}},
		{"model.layers.0.self_attn.sinks", checkpoint.BF16, []int64{8}},
		{"model.layers.0.mlp.router.weight", checkpoint.BF16, []int64{4, 256}},
	} {
		tn, ok := ck.Tensor(w.name)
		if !ok || tn.DType != w.dtype || !slices.Equal(tn.Shape, w.shape) {
			t.Errorf("%s: %v %v (found %v), want %v %v", w.name, tn.DType, tn.Shape, ok, w.dtype, w.shape)
		}
	}
	if ck.TotalBytes() != r.EstimatedBytes || ck.Len() != 2*19+3 {
		t.Errorf("checkpoint %d B, %d tensors; want %d B (the estimate), %d", ck.TotalBytes(), ck.Len(), r.EstimatedBytes, 2*19+3)
	}
}

// TestGenerateMultimodal: a Gemma-3 (text_config) and a Qwen2.5-VL (flat)
// model of 2 language-model layers, their vision towers whole: config.json
// cuts the language model's layers where the config keeps them, and the
// checkpoint holds the listing, under the names the published checkpoints
// use, with the bytes worked out by hand (BF16, 2 B per parameter).
//
// Gemma-3: embed 512·128; 2 × (q, o 128·128, k, v 128·64, q/k norms 32,
// MLP 3 · 128·256, 4 norms 128) = 2 × 148,032; norm 128; head tied →
// 361,728. SigLIP: patch 64·3·14·14 + 64, positions 4² × 64, 2 × (2
// LayerNorms, q/k/v/o 64² + 64, fc1 64·128 + 128, fc2 128·64 + 64) = 2 ×
// 33,472, post LayerNorm → 105,792. Projector 64·128 + 64 = 8,256.
//
// Qwen2.5-VL: embed and lm_head 512·128 × 2; 2 × (q, o 128·128, k, v
// 128·64, biases 128 + 2 · 64, MLP 3 · 128·256, 2 norms) = 2 × 147,968;
// norm → 427,136. Vision: patch 64·3·2·14·14 = 75,264; 2 × (2 norms, qkv
// 64·192 + 192, proj 64² + 64, gate/up 64·96 + 96, down 96·64 + 64) = 2 ×
// 35,456; merger 64 + (256² + 256) + (256·128 + 128) = 98,752 → 244,928.
func TestGenerateMultimodal(t *testing.T) {
	tests := []struct {
		config         string
		tensors        int
		params         int64
		layersIn, name string // where num_hidden_layers is cut; a vision tensor's name
	}{
		{"tiny-gemma3.json", 28 + 37 + 2, 361_728 + 105_792 + 8_256, "text_config", "vision_tower.vision_model.encoder.layers.1.mlp.fc2.bias"},
		{"tiny-qwen2.5-vl.json", 27 + 30, 427_136 + 244_928, "", "visual.merger.mlp.2.weight"},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			r := ForTest(t, filepath.Join("testdata", tt.config), Options{Layers: 2})
			if len(r.Tensors) != tt.tensors || r.EstimatedBytes != 2*tt.params || r.Manifest.TotalBytes != 2*tt.params {
				t.Fatalf("%d tensors, estimate %d B, written %d B; want %d, %d B", len(r.Tensors), r.EstimatedBytes, r.Manifest.TotalBytes, tt.tensors, 2*tt.params)
			}
			raw, err := os.ReadFile(r.Config)
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatal(err)
			}
			if tt.layersIn != "" {
				if err := json.Unmarshal(obj[tt.layersIn], &obj); err != nil {
					t.Fatal(err)
				}
			}
			if string(obj["num_hidden_layers"]) != "2" {
				t.Errorf("config.json: num_hidden_layers %s", obj["num_hidden_layers"])
			}
			cfg, err := arena.LoadConfig(r.Dir)
			if err != nil || cfg.NumLayers != 2 || cfg.Vision == nil || cfg.Vision.NumLayers != 2 {
				t.Fatalf("%v, config %+v", err, cfg)
			}
			ck, err := checkpoint.Open(r.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if _, ok := ck.Tensor(tt.name); !ok || ck.TotalBytes() != r.EstimatedBytes || ck.Len() != tt.tensors {
				t.Errorf("%s found %v; checkpoint %d B, %d tensors", tt.name, ok, ck.TotalBytes(), ck.Len())
			}
		})
	}
}

// TestGenerateDeterministic: the same seed gives the same bytes, another
// seed other bytes.
func TestGenerateDeterministic(t *testing.T) {
	cfg := filepath.Join("testdata", "tiny-llama.json")
	a := ForTest(t, cfg, Options{Seed: 1, Layers: 1})
	b := ForTest(t, cfg, Options{Seed: 1, Layers: 1})
	c := ForTest(t, cfg, Options{Seed: 2, Layers: 1})
	const name = "model.layers.0.self_attn.q_proj.weight"
	if a.Manifest.Checksums[name] != b.Manifest.Checksums[name] {
		t.Errorf("seed 1 twice: %08x and %08x", a.Manifest.Checksums[name], b.Manifest.Checksums[name])
	}
	if a.Manifest.Checksums[name] == c.Manifest.Checksums[name] {
		t.Errorf("seeds 1 and 2 give the same %08x", a.Manifest.Checksums[name])
	}
}

// TestGenerateErrors: a non-empty folder, a layer count the config does not
// have, a family without listed names; nothing is written.
func TestGenerateErrors(t *testing.T) {
	cfg := filepath.Join("testdata", "tiny-llama.json")
	t.Run("not empty", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Generate(cfg, dir, Options{Layers: 1})
		var oe *OutputError
		if !errors.Is(err, ErrNotEmpty) || !errors.As(err, &oe) || oe.Dir != dir || oe.Entries != 1 {
			t.Fatalf("err = %v, want an *OutputError for %s with 1 entry", err, dir)
		}
	})
	for _, layers := range []int64{-1, 5} {
		t.Run("layers", func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			_, err := Generate(cfg, dir, Options{Layers: layers})
			var le *LayersError
			if !errors.Is(err, ErrLayers) || !errors.As(err, &le) || le.Layers != layers || le.Max != 4 {
				t.Fatalf("err = %v, want a *LayersError for %d of 4", err, layers)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was created", dir)
			}
		})
	}
	t.Run("not listed", func(t *testing.T) {
		_, err := Generate(filepath.Join("..", "..", "examples", "configs", "deepseek-v4-flash.json"), t.TempDir(), Options{})
		if !errors.Is(err, arena.ErrNoCheckpointNames) {
			t.Fatalf("err = %v, want arena.ErrNoCheckpointNames", err)
		}
	})
}
