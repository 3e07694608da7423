package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
)

// tinyConfig is the path of a scaled-down config of internal/modelgen's testdata.
func tinyConfig(name string) string {
	return filepath.Join("..", "..", "internal", "modelgen", "testdata", name+".json")
}

// genModel runs gen-model for config into a fresh folder with args added
// and returns the folder and the JSON summary.
func genModel(t *testing.T, config string, args ...string) (string, genModelSummary) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	r := cli(t, append([]string{"gen-model", "--config", config, "--out", dir, "--json"}, args...)...).mustSucceed(t)
	var s genModelSummary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("%v in:\n%s", err, r.stdout)
	}
	return dir, s
}

// TestGenModel generates a 2-layer Llama-shaped and a 2-layer
// Qwen3-MoE-shaped model, reopens each with checkpoint.Open and checks the
// names against arena.CheckpointTensors of the folder's config.json and the
// total against the estimate for 2 layers.
func TestGenModel(t *testing.T) {
	tests := []struct {
		config  string
		args    []string
		tensors int
		bytes   int64
		files   []string
	}{
		{config: "tiny-llama", tensors: 21, bytes: 4_459_008, files: []string{"model.safetensors"}},
		{config: "tiny-qwen3-moe", args: []string{"--shard-size", "1MB"}, tensors: 69, bytes: 4_074_240, files: []string{
			"model-00001-of-00005.safetensors", "model-00002-of-00005.safetensors", "model-00003-of-00005.safetensors",
			"model-00004-of-00005.safetensors", "model-00005-of-00005.safetensors"}},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			dir, s := genModel(t, tinyConfig(tt.config), append([]string{"--layers", "2", "--seed", "3"}, tt.args...)...)
			if s.Layers != 2 || s.Tensors != tt.tensors || s.Bytes != tt.bytes || s.EstimatedBytes != tt.bytes || !slices.Equal(s.Files, tt.files) {
				t.Fatalf("summary %+v; want 2 layers, %d tensors, %d B, files %v", s, tt.tensors, tt.bytes, tt.files)
			}
			cfg, err := arena.LoadConfig(dir)
			if err != nil {
				t.Fatal(err)
			}
			list, err := arena.CheckpointTensors(cfg, arena.WeightOptions{})
			if err != nil {
				t.Fatal(err)
			}
			est, err := arena.EstimateWeights(cfg, arena.WeightOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ck, err := checkpoint.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if ck.TotalBytes() != est.Bytes || ck.TotalBytes() != tt.bytes {
				t.Errorf("checkpoint %d B, estimate %d B, want %d B", ck.TotalBytes(), est.Bytes, tt.bytes)
			}
			var got, want []string
			for _, tn := range ck.Tensors() {
				got = append(got, tn.Name)
			}
			for _, l := range list {
				want = append(want, l.Name)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("names differ:\n file    %v\n listing %v", got, want)
			}
		})
	}
	t.Run("text", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "m")
		r := cli(t, "gen-model", "--config", tinyConfig("tiny-llama"), "--out", dir, "--layers", "1").mustSucceed(t)
		for _, want := range []string{"wrote " + dir + ": llama, 1 layers, seed 0", "files     model.safetensors", "tensors   12"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("refuses a non-empty folder", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, "gen-model", "--config", tinyConfig("tiny-llama"), "--out", dir)
		if r.code != exitFailure || !strings.Contains(r.stderr, "output folder is not empty (1 entries)") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{
			{"--layers", "9"}, {"--layers", "-1"}, {"--shard-size", "0"},
		} {
			r := cli(t, append([]string{"gen-model", "--config", tinyConfig("tiny-llama"), "--out", filepath.Join(t.TempDir(), "m")}, args...)...)
			if r.code != exitFailure {
				t.Errorf("%v: exit %d, want %d", args, r.code, exitFailure)
			}
		}
	})
}

// TestFitModel fits a generated model folder: the weights line is the
// checkpoint's exact bytes, the estimate beside it, in text and JSON.
func TestFitModel(t *testing.T) {
	dir, s := genModel(t, tinyConfig("tiny-qwen3-moe"), "--layers", "2", "--shard-size", "1MB")
	args := []string{"fit", "--model", dir, "--device-memory", "2GiB", "--reserve", "0"}
	t.Run("json", func(t *testing.T) {
		r := cli(t, append(args, "--json")...).mustSucceed(t)
		var fr arena.FitReport
		if err := json.Unmarshal([]byte(r.stdout), &fr); err != nil {
			t.Fatal(err)
		}
		pad := poolPadding(t, dir)
		if pad != 768 {
			t.Fatalf("the generated checkpoint's pool padding is %d B, want 768 (the text below counts on it)", pad)
		}
		if fr.WeightSource != "checkpoint" || fr.WeightBytes != s.Bytes+pad || fr.CheckpointWeightBytes != s.Bytes ||
			fr.WeightPaddingBytes != pad || fr.EstimatedWeightBytes != s.Bytes || fr.ModelType != "qwen3_moe" || !fr.Fits {
			t.Errorf("fit: source %q, weights %d, checkpoint %d, padding %d, estimate %d, %s, fits %v; want checkpoint, %d + %d, %d, %d, %d",
				fr.WeightSource, fr.WeightBytes, fr.CheckpointWeightBytes, fr.WeightPaddingBytes, fr.EstimatedWeightBytes, fr.ModelType, fr.Fits,
				s.Bytes, pad, s.Bytes, pad, s.Bytes)
		}
	})
	t.Run("text", func(t *testing.T) {
		r := cli(t, args...).mustSucceed(t)
		for _, want := range []string{
			"weights                   4075008 B (3.89 MiB)",
			"  from                    the checkpoint's safetensors headers",
			"  tensors                 4074240 B (3.89 MiB)",
			"  pool padding            768 B (each tensor at a 256-byte-aligned offset of one pooled allocation)",
			"  estimate                4074240 B (3.89 MiB) from config.json (+0 B against the checkpoint)",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("exact bytes count", func(t *testing.T) {
		// The checkpoint of 4 layers under the 2-layer config.json: the fit
		// counts the files' bytes, not the config's estimate.
		big, s4 := genModel(t, tinyConfig("tiny-qwen3-moe"))
		small, _ := genModel(t, tinyConfig("tiny-qwen3-moe"), "--layers", "2")
		r := cli(t, "fit", "--model", big, "--config", small, "--json", "--device-memory", "2GiB").mustSucceed(t)
		var fr arena.FitReport
		if err := json.Unmarshal([]byte(r.stdout), &fr); err != nil {
			t.Fatal(err)
		}
		pad := poolPadding(t, big)
		if fr.CheckpointWeightBytes != s4.Bytes || fr.WeightPaddingBytes != pad || fr.WeightBytes != s4.Bytes+pad || fr.EstimatedWeightBytes != s.Bytes {
			t.Errorf("weights %d B (tensors %d B, padding %d B), estimate %d B; want %d B + %d B (4 layers), %d B (2 layers)",
				fr.WeightBytes, fr.CheckpointWeightBytes, fr.WeightPaddingBytes, fr.EstimatedWeightBytes, s4.Bytes, pad, s.Bytes)
		}
	})
	t.Run("errors", func(t *testing.T) {
		if r := cli(t, "fit"); r.code != exitFailure || !strings.Contains(r.stderr, "--config or --model is required") {
			t.Errorf("no --config/--model: exit %d, stderr %q", r.code, r.stderr)
		}
		broken := t.TempDir()
		raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(broken, "config.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := cli(t, "fit", "--model", broken); r.code != exitFailure || !strings.Contains(r.stderr, "--model:") {
			t.Errorf("folder without safetensors: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// poolPadding is the alignment padding of the pooled allocation of the
// checkpoint in dir, counted here tensor by tensor (each non-empty one
// rounded up to 256 B), apart from arena.PoolOffsets.
func poolPadding(t *testing.T, dir string) int64 {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var pad int64
	for _, tn := range ck.Tensors() {
		pad += (256 - tn.Bytes%256) % 256
	}
	return pad
}

// gen-model takes a built-in config by name, as fit and run do, and lists
// the names for one that is neither a path nor a built-in.
func TestGenModelBuiltinConfig(t *testing.T) {
	dir, s := genModel(t, "qwen3-0.6b", "--layers", "1", "--zeros")
	if s.ModelType != "qwen3" || s.Layers != 1 {
		t.Fatalf("gen-model of the built-in qwen3-0.6b: %+v, want a 1-layer qwen3", s)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "gen-model", "--config", "no-such-model", "--out", filepath.Join(t.TempDir(), "m"))
	if r.code != 2 || !strings.Contains(r.stderr, "qwen3-0.6b") {
		t.Fatalf("gen-model of an unknown name: exit %d, stderr %q; want 2 and the built-in names", r.code, r.stderr)
	}
}
