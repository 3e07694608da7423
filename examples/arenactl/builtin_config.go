package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/examples/configs"
)

// defaultRunConfig is the built-in config (configs.FS) run and soak plan
// when --config is not given: Qwen3-0.6B, which run generates a checkpoint
// of and serves (see runLong).
const defaultRunConfig = "qwen3-0.6b.json"

// builtinRunConfigName is defaultRunConfig's path in the repository, which
// loadConfig resolves to the built-in copy from any directory; soak plans
// it by this name, run writes it out for modelgen (resolveConfig).
var builtinRunConfigName = filepath.Join("examples", "configs", defaultRunConfig)

// builtinConfigDir writes the built-in configs (configs.FS: every
// examples/configs/*.json) into a new temporary folder, for the commands
// whose defaults read files by path, and returns it with a function that
// removes it.
func builtinConfigDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "arenactl-configs-")
	if err != nil {
		return "", nil, err
	}
	remove := func() { os.RemoveAll(dir) }
	if err := os.CopyFS(dir, configs.FS); err != nil {
		remove()
		return "", nil, fmt.Errorf("write the built-in configs: %w", err)
	}
	return dir, remove, nil
}

// useBuiltinConfig makes --config (registered by planFlags.register)
// default to the built-in defaultRunConfig: it shows no path as its
// default, since none exists outside the repository; when the flag is not
// given, soak plans builtinRunConfigName and run writes the config out
// (resolveConfig).
func useBuiltinConfig(fs *pflag.FlagSet, p *planFlags) {
	f := fs.Lookup("config")
	p.config, f.DefValue = "", ""
	f.Usage += " (default: the built-in Qwen3-0.6B config, examples/configs/" + defaultRunConfig + ")"
}

// loadConfig reads the config at path (arena.LoadConfig). A path that does
// not exist but names a built-in config (builtinConfig) reads the built-in
// one. Errors: arena.LoadConfig's.
func loadConfig(path string) (*arena.ModelConfig, error) {
	cfg, err := arena.LoadConfig(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return cfg, err
	}
	data, ok := builtinConfig(path)
	if !ok {
		return nil, notFound(err)
	}
	return arena.ParseConfig(data)
}

// resolveConfig is path when it exists; else, when it names a built-in
// config (builtinConfig), that config written into a new temporary folder
// (for what reads a path), with a function that removes the folder.
// Errors: notFound's for a path that neither exists nor names one; the
// temporary folder's.
func resolveConfig(path string) (string, func(), error) {
	_, err := os.Stat(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return path, func() {}, nil // a path that exists, or an error the reader will report
	}
	data, ok := builtinConfig(path)
	if !ok {
		return "", nil, notFound(fmt.Errorf("config %q: %w", path, err))
	}
	dir, err := os.MkdirTemp("", "arenactl-config-")
	if err != nil {
		return "", nil, err
	}
	remove := func() { os.RemoveAll(dir) }
	out := filepath.Join(dir, "config.json")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		remove()
		return "", nil, fmt.Errorf("write the built-in config: %w", err)
	}
	return out, remove, nil
}

// notFound is err, a config path that does not exist, with the names of the
// built-in configs a --config may give instead.
func notFound(err error) error {
	names, _ := fs.Glob(configs.FS, "*.json")
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".json")
	}
	return fmt.Errorf("%w: give a config.json, a model folder, or a built-in config by name: %s", err, strings.Join(names, ", "))
}

// builtinConfig is the built-in config (configs.FS) that path names —
// "llama-3.1-8b", "llama-3.1-8b.json" or
// "examples/configs/llama-3.1-8b.json" — so the example configs work from
// any directory; false for a path in another folder or an unknown name.
func builtinConfig(path string) ([]byte, bool) {
	if dir := filepath.Dir(filepath.Clean(path)); dir != "." && dir != filepath.Join("examples", "configs") {
		return nil, false
	}
	name := filepath.Base(path)
	if !strings.HasSuffix(name, ".json") {
		name += ".json"
	}
	data, err := configs.FS.ReadFile(name)
	return data, err == nil
}
