package configs_test

import (
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/examples/configs"
)

// FS holds every config file of the folder (the embed pattern misses
// none), and each one is a config arena parses and plans at its defaults.
func TestFSIsTheFolder(t *testing.T) {
	onDisk, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := fs.Glob(configs.FS, "*")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(embedded, onDisk) || len(onDisk) == 0 {
		t.Fatalf("embedded %q, the folder has %q", embedded, onDisk)
	}
	for _, name := range embedded {
		data, err := configs.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := arena.ParseConfig(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := arena.PlanFor(cfg, arena.Options{}); err != nil {
			t.Errorf("%s: plan: %v", name, err)
		}
	}
}
