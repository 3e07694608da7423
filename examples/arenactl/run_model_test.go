package main

import (
	"encoding/json"
	"fmt"
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
	r := cli(t, "run", "--model", gen.Dir, "--json", "--steps", "40", "--clients", "4")
	checkProgressLines(t, r, gen.Manifest.TotalBytes)
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
	tr := cli(t, "run", "--model", gen.Dir, "--steps", "4")
	checkProgressLines(t, tr, gen.Manifest.TotalBytes)
	text := tr.stdout
	if !strings.Contains(text, "weights ") || !strings.Contains(text, "invariants: all hold") {
		t.Errorf("text report without the weights line or the invariants:\n%s", text)
	}
	if e := cli(t, "run", "--model", t.TempDir()); e.code == exitOK || !strings.Contains(e.stderr, "config") {
		t.Errorf("run --model of an empty folder: exit %d, %s", e.code, e.stderr)
	}
}

// checkProgressLines fails the test unless r exited 0 with a stderr (not a
// terminal) of nothing but the weights load's plain progress lines: at most
// ten, percentages rising and ending at 100%, bytes done rising and ending
// at total, each naming total, and none of them in stdout.
func checkProgressLines(t *testing.T, r result, total int64) {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout, "weights: ") && strings.Contains(r.stdout, "%") {
		t.Errorf("progress in stdout:\n%s", r.stdout)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) > 10 { // strings.Split gives at least one: an empty stderr fails the scan below
		t.Fatalf("%d progress lines, want 1 to 10:\n%s", len(lines), r.stderr)
	}
	lastPct, lastDone := -1, int64(-1)
	for _, l := range lines {
		var pct int
		var done, of int64
		var rate float64
		var tensor string
		if _, err := fmt.Sscanf(l, "weights: %d%% %d of %d B %f GB/s %s", &pct, &done, &of, &rate, &tensor); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		// The rate is a speed: only its presence is checked (a slow run prints 0.00).
		if pct <= lastPct || done <= lastDone || of != total || rate < 0 || tensor == "" {
			t.Errorf("line %q after %d%%, %d B; want rising, of %d B, a rate and a tensor", l, lastPct, lastDone, total)
		}
		lastPct, lastDone = pct, done
	}
	if lastPct != 100 || lastDone != total {
		t.Errorf("last line at %d%%, %d B; want 100%%, %d B:\n%s", lastPct, lastDone, total, r.stderr)
	}
}
