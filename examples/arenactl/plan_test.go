package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// goldenModels are the configs whose plan and fit are kept as golden files.
var goldenModels = []string{"llama-3.1-8b", "qwen3-next-80b-a3b-thinking", "deepseek-v3"}

func TestPlanJSONGolden(t *testing.T) {
	for _, model := range goldenModels {
		t.Run(model, func(t *testing.T) {
			r := cli(t, "plan", "--config", configPath(model), "--json").mustSucceed(t)
			golden(t, "plan-"+model+".golden", r.stdout)
		})
	}
}

// TestPlanJSONMatchesArena checks the --json output against arena.PlanFor
// directly: key order, present buffers only, names, shapes and total.
func TestPlanJSONMatchesArena(t *testing.T) {
	for _, model := range goldenModels {
		t.Run(model, func(t *testing.T) {
			r := cli(t, "plan", "--config", configPath(model), "--json").mustSucceed(t)
			if got := topLevelKeys(t, r.stdout); strings.Join(got[:4], ",") != "model_type,buffers,slabs,total_bytes" {
				t.Errorf("top-level keys %v: want model_type, buffers, slabs, total_bytes first", got)
			}
			var got planJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatal(err)
			}
			cfg, err := arena.LoadConfig(configPath(model))
			if err != nil {
				t.Fatal(err)
			}
			plan, err := arena.PlanFor(cfg, arena.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if got.ModelType != plan.ModelType || got.TotalBytes != plan.TotalBytes {
				t.Errorf("model_type %q total_bytes %d, want %q %d", got.ModelType, got.TotalBytes, plan.ModelType, plan.TotalBytes)
			}
			i := 0
			for _, b := range plan.Buffers {
				if !b.Present() {
					continue
				}
				if i >= len(got.Buffers) {
					t.Fatalf("%d buffers in the output, want more (%s is missing)", len(got.Buffers), b.ID)
				}
				g := got.Buffers[i]
				if g.Name != b.ID.String() || g.DType != b.DType.String() || shapeString(g.Shape) != shapeString(b.Shape) || g.Bytes != b.Bytes {
					t.Errorf("buffer %d: got %+v, want %s %s %v %d", i, g, b.ID, b.DType, b.Shape, b.Bytes)
				}
				i++
			}
			if i != len(got.Buffers) {
				t.Errorf("%d buffers in the output, want %d", len(got.Buffers), i)
			}
		})
	}
}

// topLevelKeys returns the keys of the JSON object in s, in order.
func topLevelKeys(t *testing.T, s string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestPlanText(t *testing.T) {
	r := cli(t, "plan", "--config", configPath("qwen3-next-80b-a3b-thinking")).mustSucceed(t)
	for _, want := range []string{"BUFFER", "hidden_states", "[8192, 2048]", "TOTAL", "--all lists them"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "o_latent") {
		t.Errorf("absent buffer o_latent listed without --all")
	}
	small := cli(t, "plan", "--config", configPath("qwen3-next-80b-a3b-thinking"), "--max-batch-tokens", "64").mustSucceed(t)
	if !strings.Contains(small.stdout, "max_batch_tokens=64") || !strings.Contains(small.stdout, "max_batch_size=64") {
		t.Errorf("--max-batch-tokens 64: want max_batch_size to follow it down to 64:\n%s", small.stdout)
	}
	all := cli(t, "plan", "--config", configPath("qwen3-next-80b-a3b-thinking"), "--all", "--fp8-rowwise").mustSucceed(t)
	for _, want := range []string{"o_latent", "absent: ", arena.SlabSSMRowwiseW} {
		if !strings.Contains(all.stdout, want) {
			t.Errorf("plan --all --fp8-rowwise lacks %q:\n%s", want, all.stdout)
		}
	}
	for line := range strings.Lines(all.stdout) {
		if strings.HasSuffix(strings.TrimSuffix(line, "\n"), " ") {
			t.Errorf("trailing space: %q", line)
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"model_type": "llama", "hidden_size": 4096,`), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	llama := configPath("llama-3.1-8b")
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"missing config file", []string{"plan", "--config", missing}, []string{missing, "no such file"}},
		{"broken JSON", []string{"plan", "--config", broken}, []string{broken, "config"}},
		{"no --config", []string{"plan"}, []string{`"config"`}},
		{"negative max_batch_tokens", []string{"plan", "--config", llama, "--max-batch-tokens", "-1"}, []string{"--max-batch-tokens", "max_batch_tokens", "-1"}},
		{"negative kv_block_size in fit", []string{"fit", "--config", llama, "--kv-block-size", "-16"}, []string{"--kv-block-size", "kv_block_size"}},
		{"max_batch_size past max_batch_tokens", []string{"plan", "--config", llama, "--max-batch-tokens", "64", "--max-batch-size", "128"}, []string{"--max-batch-size", "max_batch_size"}},
		{"negative max_batch_tokens in run", []string{"run", "--config", llama, "--max-batch-tokens", "-1"}, []string{"--max-batch-tokens"}},
		{"utilization out of range", []string{"fit", "--config", llama, "--gpu-memory-utilization", "1.5"}, []string{"--gpu-memory-utilization", "1.5"}},
		{"utilization out of range in run", []string{"run", "--config", llama, "--gpu-memory-utilization", "0"}, []string{"--gpu-memory-utilization"}},
		{"utilization 0 in fit", []string{"fit", "--config", llama, "--gpu-memory-utilization", "0"}, []string{"--gpu-memory-utilization", "gpu_memory_utilization = 0", "(0, 1]"}},
		{"negative k_max", []string{"plan", "--config", llama, "--k-max", "-1"}, []string{"--k-max", "k_max = -1", "set 0 for no speculative decoding"}},
		{"bad size", []string{"fit", "--config", llama, "--device-memory", "12QB"}, []string{"--device-memory", "QB"}},
		{"used past total", []string{"fit", "--config", llama, "--device-memory", "80GB", "--device-used", "81GB"}, []string{"--device-used", "--device-memory"}},
		{"bad backend", []string{"run", "--config", llama, "--backend", "tpu"}, []string{"--backend", "tpu"}},
		{"bad layout", []string{"run", "--config", llama, "--layout", "ragged"}, []string{"--layout", "ragged"}},
		{"no clients", []string{"run", "--config", llama, "--clients", "0"}, []string{"--clients"}},
		{"bad log level", []string{"--log-level", "loud", "plan", "--config", llama}, []string{"--log-level", "loud"}},
		{"unknown flag", []string{"plan", "--config", llama, "--bogus"}, []string{"--bogus"}},
		{"out of device memory", []string{"run", "--config", llama, "--device-memory", "1GiB", "--steps", "1"}, []string{"out of device memory", "budget"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, tc.args...)
			if r.code != exitFailure {
				t.Errorf("exit %d, want %d", r.code, exitFailure)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty:\n%s", r.stdout)
			}
			if n := strings.Count(r.stderr, "arenactl: "); n != 1 {
				t.Errorf("the error is printed %d times, want once:\n%s", n, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("error %q does not name %q", strings.TrimSpace(r.stderr), w)
				}
			}
		})
	}
}
