package main

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// A built-in config is found by its name from any directory; a path with
// another folder is never swapped for one, and a path that does not exist
// is an error that names the built-in configs.
func TestLoadConfigBuiltinName(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, name := range []string{"llama-3.1-8b", "llama-3.1-8b.json", "examples/configs/llama-3.1-8b.json"} {
		cfg, err := loadConfig(name)
		if err != nil || cfg.ModelType != "llama" || cfg.HiddenSize != 4096 {
			t.Errorf("%s: %v, %+v", name, err, cfg)
		}
	}
	for _, name := range []string{"/nope/llama-3.1-8b.json", "no-such-model"} {
		_, err := loadConfig(name)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "qwen3-0.6b, qwen3-30b-a3b") {
			t.Errorf("%s: %v, want the file's not-exist error naming the built-in configs", name, err)
		}
	}
}

// The cluster commands send the built-in config a name stands for.
func TestReadConfigJSONBuiltinName(t *testing.T) {
	t.Chdir(t.TempDir())
	data, err := readConfigJSON("qwen3-8b")
	if err != nil || !strings.Contains(string(data), `"qwen3"`) {
		t.Fatalf("readConfigJSON(qwen3-8b): %v, %.60q", err, data)
	}
	if _, err := readConfigJSON("no-such-model"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "llama-3.1-8b") {
		t.Fatalf("readConfigJSON(no-such-model): %v, want not-exist naming the built-in configs", err)
	}
}
