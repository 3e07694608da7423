package arena

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// exampleConfigs returns the paths of every config in examples/configs.
func exampleConfigs(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "examples", "configs", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example configs found: %v", err)
	}
	return paths
}

// loadExample loads one example config by file name.
func loadExample(t testing.TB, name string) *ModelConfig {
	t.Helper()
	cfg, err := LoadConfig(filepath.Join("..", "examples", "configs", name))
	if err != nil {
		t.Fatalf("LoadConfig(%s): %v", name, err)
	}
	return cfg
}

// planExample plans one example config under opts.
func planExample(t testing.TB, name string, opts Options) (*ModelConfig, *Plan) {
	t.Helper()
	cfg := loadExample(t, name)
	plan, err := PlanFor(cfg, opts)
	if err != nil {
		t.Fatalf("PlanFor(%s): %v", name, err)
	}
	return cfg, plan
}
