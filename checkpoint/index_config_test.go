package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A model's config.json given where a checkpoint's index is expected is
// named as what it is.
func TestOpenConfigJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(`{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p)
	if !errors.Is(err, ErrBadIndex) || !strings.Contains(err.Error(), "config.json, not a checkpoint's index") {
		t.Fatalf("Open(config.json): %v, want ErrBadIndex saying it is a config", err)
	}
}
