package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// acmeMoE is an MoE config.json whose model_type, acme_moe, arena does not
// know (GLM-4.5's sizes, 160 routed experts), kept with arena's tests.
var acmeMoE = filepath.Join("..", "..", "arena", "testdata", "acme-moe-config.json")

// modelFolder makes a model folder holding the named example config as
// config.json.
func modelFolder(t *testing.T, model string) string {
	t.Helper()
	data, err := os.ReadFile(configPath(model))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), model)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConfigInputRefused: inputs the config reader refuses end in exit
// status 2 with one line that says why, and no report.
func TestConfigInputRefused(t *testing.T) {
	empty := t.TempDir()
	over := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(over, []byte(`{"model_type": "llama"}`+strings.Repeat(" ", arena.MaxConfigBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"fit /dev/zero", []string{"fit", "--config", "/dev/zero"}, []string{"/dev/zero is a character device, not a regular file"}},
		{"plan folder without config.json", []string{"plan", "--config", empty}, []string{empty, "a directory without a config.json"}},
		{"fit folder without config.json", []string{"fit", "--config", empty, "--json"}, []string{empty, "a directory without a config.json"}},
		{"fit config past the cap", []string{"fit", "--config", over}, []string{over, "input is 4194327 bytes", "limit of 4194304 bytes"}},
		{"plan unknown MoE", []string{"plan", "--config", acmeMoE}, []string{acmeMoE, `"model_type" = acme_moe`, "n_routed_experts = 160", "qwen3_moe"}},
		{"fit unknown MoE", []string{"fit", "--config", acmeMoE}, []string{acmeMoE, "n_routed_experts = 160"}},
		{"fit unknown MoE as JSON", []string{"fit", "--config", acmeMoE, "--json"}, []string{"n_routed_experts = 160"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.args[2] == "/dev/zero" {
				if _, err := os.Stat("/dev/zero"); err != nil {
					t.Skipf("/dev/zero: %v", err)
				}
			}
			r := cli(t, tt.args...)
			if r.code != exitFailure || r.stdout != "" {
				t.Errorf("exit %d, stdout %q; want exit %d and no report", r.code, r.stdout, exitFailure)
			}
			if n := strings.Count(r.stderr, "arenactl: "); n != 1 {
				t.Errorf("the error is printed %d times, want once:\n%s", n, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("error %q does not say %q", strings.TrimSpace(r.stderr), w)
				}
			}
		})
	}
}

// TestConfigFolder: --config takes a model folder holding config.json, as
// vLLM does; the plan and the fit are those of the file.
func TestConfigFolder(t *testing.T) {
	const model = "llama-3.1-8b"
	dir := modelFolder(t, model)
	for _, cmd := range []string{"plan", "fit"} {
		t.Run(cmd, func(t *testing.T) {
			fromDir := cli(t, cmd, "--config", dir, "--json").mustSucceed(t)
			fromFile := cli(t, cmd, "--config", configPath(model), "--json").mustSucceed(t)
			if fromDir.stdout != fromFile.stdout {
				t.Errorf("%s of the folder differs from the file's:\n%s", cmd, lineDiff(fromFile.stdout, fromDir.stdout))
			}
		})
	}
}

// TestFitShowsPlanNotes: an unknown dense model_type is planned as dense,
// and the fit says so in its text and its JSON, as the plan does.
func TestFitShowsPlanNotes(t *testing.T) {
	data, err := os.ReadFile(configPath("llama-3.1-8b"))
	if err != nil {
		t.Fatal(err)
	}
	const llama = `"model_type": "llama"`
	if !strings.Contains(string(data), llama) {
		t.Fatalf("the llama config has no %s", llama)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), llama, `"model_type": "foo_lm"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	const note = `unknown model_type "foo_lm": planned as dense`

	plan := cli(t, "plan", "--config", path).mustSucceed(t)
	text := cli(t, "fit", "--config", path).mustSucceed(t)
	for name, out := range map[string]string{"plan": plan.stdout, "fit": text.stdout} {
		if !strings.Contains(out, note) {
			t.Errorf("%s text lacks %q:\n%s", name, note, out)
		}
	}
	if !strings.Contains(text.stdout, "FITS: foo_lm") || !strings.Contains(text.stdout, "  - plan: "+note) {
		t.Errorf("fit text: want FITS and the note under notes:\n%s", text.stdout)
	}

	js := cli(t, "fit", "--config", path, "--json").mustSucceed(t)
	var r arena.FitReport
	if err := json.Unmarshal([]byte(js.stdout), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Notes) == 0 || r.Notes[0] != "plan: "+note || r.ModelType != "foo_lm" {
		t.Errorf("fit JSON: model_type %q, notes %q; want the plan's note first", r.ModelType, r.Notes)
	}
}
