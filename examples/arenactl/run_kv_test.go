package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/internal/modelgen"
)

func runKV(t *testing.T, args ...string) runReport {
	t.Helper()
	r := cli(t, append([]string{"run", "--json", "--kv"}, args...)...)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.InvariantsFailed) != 0 {
		t.Fatalf("invariants failed: %v", rep.InvariantsFailed)
	}
	return rep
}

// run --kv with a generated Llama-shaped model: the weights are loaded,
// the KV cache takes what they and the arena leave, a generated trace is
// served to the end with prefix hits, and the release gives everything
// back.
func TestRunKVServesATrace(t *testing.T) {
	gen := modelgen.ForTest(t, "../../internal/modelgen/testdata/tiny-llama.json", modelgen.Options{Seed: 5})
	rep := runKV(t, "--model", gen.Dir, "--requests", "40", "--max-batch-tokens", "2048", "--kv-blocks", "4096")
	switch {
	case !rep.Served || rep.Requests != 40 || rep.SequencesFinished != 40:
		t.Errorf("served %v: %d of %d requests finished, want 40 of 40", rep.Served, rep.SequencesFinished, rep.Requests)
	case rep.KVCacheBytes <= 0 || rep.KVBlocks != 4096 || rep.ModelKVBlocks < 4096:
		t.Errorf("kv cache %d B of %d blocks (the fit allows %d), want 4096", rep.KVCacheBytes, rep.KVBlocks, rep.ModelKVBlocks)
	case rep.DeviceFreeBuilt-rep.DeviceFreeKV != rep.KVCacheBytes:
		t.Errorf("the device lost %d B to the KV cache, want %d", rep.DeviceFreeBuilt-rep.DeviceFreeKV, rep.KVCacheBytes)
	case rep.PrefixQueries != 40 || rep.PrefixHits == 0 || rep.PrefixHitTokens%16 != 0:
		t.Errorf("prefix cache: %d hits of %d lookups, %d tokens; want hits in whole blocks over 40 lookups", rep.PrefixHits, rep.PrefixQueries, rep.PrefixHitTokens)
	case rep.Steps == 0 || rep.KVRoundTrips < rep.Steps || rep.LedgerBytesAfterRelease != 0:
		t.Errorf("%d steps, %d KV round trips, ledger after release %d B", rep.Steps, rep.KVRoundTrips, rep.LedgerBytesAfterRelease)
	}
}

// A cache of 100 blocks cannot hold the trace at once: the scheduler
// preempts, and every request still finishes.
func TestRunKVPreempts(t *testing.T) {
	rep := runKV(t, "--config", configPath("llama-3.1-8b"), "--max-batch-tokens", "2048", "--max-seq-len", "2048", "--kv-blocks", "100", "--requests", "16")
	if rep.KVBlocks != 100 || rep.Preemptions == 0 || rep.SequencesFinished != 16 || rep.KVPeakUsedBlocks > 99 {
		t.Fatalf("100 blocks: %d blocks, %d preemptions, %d finished, peak %d used; want preemptions, 16 finished, at most 99 used",
			rep.KVBlocks, rep.Preemptions, rep.SequencesFinished, rep.KVPeakUsedBlocks)
	}
}

// --trace replays a JSON trace, a prompt longer than max_batch_tokens
// prefilled in chunks; one that cannot be served (past max_seq_len) is
// refused before anything runs.
func TestRunKVTraceFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"requests": [
		{"id": "a", "arrival_step": 0, "prefix": "sys", "prefix_tokens": 32, "prompt_tokens": 40, "output_tokens": 3},
		{"id": "b", "arrival_step": 1, "prefix": "sys", "prefix_tokens": 32, "prompt_tokens": 50, "output_tokens": 5}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := runKV(t, "--config", configPath("llama-3.1-8b"), "--max-batch-tokens", "512", "--trace", good)
	if rep.Requests != 2 || rep.SequencesFinished != 2 || rep.PrefixHitTokens != 32 {
		t.Fatalf("replayed %d requests, %d finished, %d prefix tokens hit; want 2, 2, 32", rep.Requests, rep.SequencesFinished, rep.PrefixHitTokens)
	}
	long := filepath.Join(dir, "long.json")
	if err := os.WriteFile(long, []byte(`{"requests": [{"id": "a", "prompt_tokens": 4000, "output_tokens": 3}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if rep := runKV(t, "--config", configPath("llama-3.1-8b"), "--max-batch-tokens", "512", "--max-seq-len", "4096", "--trace", long); rep.SequencesFinished != 1 || rep.Steps < 8 {
		t.Fatalf("a 4,000-token prompt on max_batch_tokens 512: %d finished in %d steps; want 1 in at least 8", rep.SequencesFinished, rep.Steps)
	}
	e := cli(t, "run", "--kv", "--config", configPath("llama-3.1-8b"), "--max-batch-tokens", "512", "--max-seq-len", "2048", "--trace", long)
	if e.code == exitOK || !strings.Contains(e.stderr, "max_seq_len 2048") {
		t.Fatalf("a request past max_seq_len: exit %d, stderr %q", e.code, e.stderr)
	}
}
