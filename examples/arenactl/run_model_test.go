package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/internal/modelgen"
)

// run --model loads a generated, sharded Qwen3-MoE-shaped model, checks a
// window of a weight tensor in every step, and reports the load; every
// invariant holds with the weights counted.
func TestRunModel(t *testing.T) {
	gen := modelgen.ForTest(t, "../../internal/modelgen/testdata/tiny-qwen3-moe.json", modelgen.Options{Seed: 3, Layers: 2, ShardBytes: 1_500_000})
	if len(gen.Manifest.Files) < 2 {
		t.Fatalf("generated %d shards, want a sharded checkpoint", len(gen.Manifest.Files))
	}
	r := cli(t, "run", "--model", gen.Dir, "--json", "--steps", "40", "--clients", "4").mustSucceed(t)
	var rep runReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	switch {
	case rep.ModelType != "qwen3_moe" || rep.Steps != 40:
		t.Errorf("model %q, %d steps; want qwen3_moe, 40", rep.ModelType, rep.Steps)
	case rep.WeightsBytes != gen.Manifest.TotalBytes:
		t.Errorf("weights_bytes %d, want the checkpoint's %d", rep.WeightsBytes, gen.Manifest.TotalBytes)
	case rep.WeightsAllocatedBytes < rep.WeightsBytes || rep.WeightsLoadMS <= 0 || rep.WeightsLoadGBps <= 0:
		t.Errorf("weights allocated %d B in %.2f ms at %.3f GB/s", rep.WeightsAllocatedBytes, rep.WeightsLoadMS, rep.WeightsLoadGBps)
	case rep.DeviceFreeBefore-rep.DeviceFreeBuilt != rep.ArenaBytes+rep.WeightsAllocatedBytes:
		t.Errorf("the device lost %d B, want arena %d + weights %d", rep.DeviceFreeBefore-rep.DeviceFreeBuilt, rep.ArenaBytes, rep.WeightsAllocatedBytes)
	case rep.LedgerBytesAfterRelease != 0 || rep.DeviceFreeAfter != rep.DeviceFreeBefore:
		t.Errorf("after release: ledger %d B, device free %d (before %d)", rep.LedgerBytesAfterRelease, rep.DeviceFreeAfter, rep.DeviceFreeBefore)
	case len(rep.InvariantsFailed) != 0:
		t.Errorf("invariants failed: %v", rep.InvariantsFailed)
	}
	text := cli(t, "run", "--model", gen.Dir, "--steps", "4").mustSucceed(t).stdout
	if !strings.Contains(text, "weights ") || !strings.Contains(text, "invariants: all hold") {
		t.Errorf("text report without the weights line or the invariants:\n%s", text)
	}
	if e := cli(t, "run", "--model", t.TempDir()); e.code == exitOK || !strings.Contains(e.stderr, "config") {
		t.Errorf("run --model of an empty folder: exit %d, %s", e.code, e.stderr)
	}
}
