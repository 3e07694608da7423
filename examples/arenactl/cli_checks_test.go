package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/internal/modelgen"
)

// Input a new user tried that used to pass silently or crash: each is now
// refused with the flag named, or served.
func TestCLIChecks(t *testing.T) {
	gen := modelgen.ForTest(t, "../../internal/modelgen/testdata/tiny-llama.json", modelgen.Options{Seed: 9})
	empty := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(empty, []byte(`{"requests": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "run", "--model", gen.Dir, "--kv", "--trace", empty); r.code != exitOK {
		t.Fatalf("an empty trace: exit %d, stderr %q; want it served (nothing to do)", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--model", gen.Dir, "--kv", "--kv-blocks", "16"}, "give --kv-blocks at least"},
		{[]string{"run", "--model", gen.Dir, "--trace", empty}, "--trace serves a trace through the KV cache: add --kv"},
		{[]string{"run", "--model", gen.Dir, "--requests", "0", "--kv"}, "--requests 0: must be at least 1"},
		{[]string{"fit", "--config", configPath("llama-3.1-8b"), "--model", gen.Dir}, "is not the model of --model"},
		{[]string{"run", "--config", configPath("llama-3.1-8b"), "--model", gen.Dir}, "is not the model of --model"},
		{[]string{"fit", "--config", configPath("llama-3.1-8b"), "--tensor-parallel-size", "-2"}, "--tensor-parallel-size -2: must be at least 1"},
	} {
		if r := cli(t, c.args...); r.code != exitFailure || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, r.code, r.stderr, exitFailure, c.want)
		}
	}
}
