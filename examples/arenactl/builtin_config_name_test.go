package main

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// A built-in config is found by its name from any directory; a path with
// another folder is never swapped for one.
func TestLoadConfigBuiltinName(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, name := range []string{"llama-3.1-8b", "llama-3.1-8b.json", "examples/configs/llama-3.1-8b.json"} {
		cfg, err := loadConfig(name)
		if err != nil || cfg.ModelType != "llama" || cfg.HiddenSize != 4096 {
			t.Errorf("%s: %v, %+v", name, err, cfg)
		}
	}
	for _, name := range []string{"/nope/llama-3.1-8b.json", "no-such-model"} {
		if _, err := loadConfig(name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want the file's not-exist error", name, err)
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
	if _, err := readConfigJSON("no-such-model"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("readConfigJSON(no-such-model): %v, want not-exist", err)
	}
}
