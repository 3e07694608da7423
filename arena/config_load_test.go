package arena

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeModelFolder makes a model folder in a temporary directory holding
// the llama example as config.json, and returns the folder.
func writeModelFolder(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "configs", "llama-3.1-8b.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "Llama-3.1-8B")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// assertNotRegular checks that err is the *ConfigError for a path that is
// not a regular file, and that its message says each of wants.
func assertNotRegular(t *testing.T, err error, wants ...string) {
	t.Helper()
	var ce *ConfigError
	if !errors.Is(err, ErrNotRegularFile) || !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConfigError wrapping ErrNotRegularFile and ErrInvalidConfig", err)
	}
	for _, w := range append(wants, "pass the model's config.json, or the model folder that holds it") {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not say %q", err, w)
		}
	}
}

func TestLoadConfigModelFolder(t *testing.T) {
	dir := writeModelFolder(t)
	want := loadExample(t, "llama-3.1-8b.json")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"folder": dir, "symlink to the folder": link} {
		t.Run(name, func(t *testing.T) {
			cfg, err := LoadConfig(path)
			if err != nil {
				t.Fatalf("LoadConfig(%s): %v", path, err)
			}
			if cfg.ModelType != "llama" || cfg.HiddenSize != want.HiddenSize || cfg.Counts != want.Counts {
				t.Errorf("model_type %q hidden %d counts %+v, want llama's", cfg.ModelType, cfg.HiddenSize, cfg.Counts)
			}
		})
	}
}

func TestLoadConfigRefusesDirectories(t *testing.T) {
	empty := t.TempDir()
	_, err := LoadConfig(empty)
	assertNotRegular(t, err, empty, "a directory without a config.json")

	nested := t.TempDir()
	inner := filepath.Join(nested, "config.json")
	if err := os.Mkdir(inner, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(nested)
	assertNotRegular(t, err, inner, "is a directory, not a regular file")

	// A config.json that is not valid still names the file it came from.
	bad := writeModelFolder(t)
	file := filepath.Join(bad, "config.json")
	if err := os.WriteFile(file, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = LoadConfig(bad); !errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrNotRegularFile) || !strings.Contains(err.Error(), file) {
		t.Errorf("folder with a bad config.json: err = %v, want ErrInvalidConfig naming %s", err, file)
	}
}
