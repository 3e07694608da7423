package main

import (
	"strings"
	"testing"
)

// run, soak and bench work with their default configs from a folder that
// is not the repository's root, as an installed binary does.
func TestDefaultConfigsOutsideTheRepository(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"run", "--devices", "2", "--steps", "2", "--max-batch-tokens", "256"},
		{"soak", "--duration", "300ms", "--cycle", "300ms", "--interval", "1h", "--clients", "2", "--max-batch-tokens", "256"},
		{"bench", "--suite", "carve", "--ops", "10", "--clients", "1", "--spin", "0"},
	} {
		r := cli(t, args...)
		if r.code != exitOK {
			t.Errorf("arenactl %s from a temporary folder: exit %d, stderr:\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}

// The help names the built-in config as --config's default, and no path
// that exists only in the repository.
func TestHelpNamesTheBuiltInConfig(t *testing.T) {
	for _, cmd := range []string{"run", "soak"} {
		r := cli(t, cmd, "--help").mustSucceed(t)
		if !strings.Contains(r.stdout, "(default: the built-in Qwen3-0.6B config") || strings.Contains(r.stdout, `(default "examples/configs`) {
			t.Errorf("%s --help does not name the built-in config as --config's default:\n%s", cmd, r.stdout)
		}
	}
	if r := cli(t, "bench", "--help").mustSucceed(t); !strings.Contains(r.stdout, "(default: the built-in examples/configs)") {
		t.Errorf("bench --help does not name the built-in configs as --configs' default:\n%s", r.stdout)
	}
}
