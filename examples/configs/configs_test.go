package configs_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/examples/configs"
)

// FS holds exactly the folder's config files, byte for byte, and each one
// is a config arena plans.
func TestFSIsTheFolder(t *testing.T) {
	onDisk, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := fs.Glob(configs.FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) != len(onDisk) || len(onDisk) == 0 {
		t.Fatalf("embedded %d configs, the folder has %d", len(embedded), len(onDisk))
	}
	for _, name := range onDisk {
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := configs.FS.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: embedded copy differs from the file (%v)", name, err)
			continue
		}
		if _, err := arena.ParseConfig(got); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
