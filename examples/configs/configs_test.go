package configs_test

import (
	"io/fs"
	"testing"

	"github.com/gpuarena/gpuarena/examples/configs"
)

// FS holds the configs arenactl names as built-ins, the default run's
// among them. (That each parses and plans is arena's TestParseExampleConfigs
// and plan_validate_test.go.)
func TestFSHoldsTheBuiltinConfigs(t *testing.T) {
	names, err := fs.Glob(configs.FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"qwen3-0.6b.json", "llama-3.1-8b.json", "deepseek-v3.json"} {
		if _, err := fs.Stat(configs.FS, want); err != nil {
			t.Errorf("%s: %v; FS holds %q", want, err, names)
		}
	}
}
