package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/internal/modelgen"
)

// run --rank builds one rank of a tensor-parallel layout: its weight shard
// (each tensor its shard's bytes), its arena and the KV cache of the
// layout's blocks, and the ledger is the rank's fit to the byte.
func TestRunRank(t *testing.T) {
	gen := modelgen.ForTest(t, "../../internal/modelgen/testdata/tiny-qwen3-moe.json", modelgen.Options{Seed: 5, Layers: 2, Zeros: true})
	r := cli(t, "run", "--model", gen.Dir, "--kv", "--requests", "8", "--tensor-parallel-size", "2", "--rank", "1", "--json")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	k := rep.Rank
	switch {
	case k == nil:
		t.Fatal("no rank in the report")
	case k.Rank != 1 || !k.LayoutFits || k.LayoutKVBlocks != rep.KVBlocks || k.FitKVBytes != rep.KVCacheBytes:
		t.Errorf("rank %d, layout fits %v, layout %d KV blocks, built %d", k.Rank, k.LayoutFits, k.LayoutKVBlocks, rep.KVBlocks)
	case k.FitBytes != k.FitWeightBytes+k.FitArenaBytes+k.FitKVBytes || k.LedgerBytes != k.FitBytes || k.DeviceDropBytes != k.LedgerBytes || k.PagedBytes < k.LedgerBytes:
		t.Errorf("fit %d (weights %d, arena %d, KV %d), ledger %d, device lost %d", k.FitBytes, k.FitWeightBytes, k.FitArenaBytes, k.FitKVBytes, k.LedgerBytes, k.DeviceDropBytes)
	case rep.WeightsBytes <= 0 || rep.WeightsBytes >= gen.Manifest.TotalBytes:
		t.Errorf("rank 1 loaded %d B of the checkpoint's %d: want a shard", rep.WeightsBytes, gen.Manifest.TotalBytes)
	case rep.SequencesFinished != 8 || len(rep.InvariantsFailed) != 0:
		t.Errorf("%d of 8 requests finished; invariants failed: %v", rep.SequencesFinished, rep.InvariantsFailed)
	}
	c := cli(t, "run", "--config", gen.Dir, "--requests", "8", "--tensor-parallel-size", "2", "--rank", "0", "--json")
	var crep runReport
	if err := json.Unmarshal([]byte(c.stdout), &crep); c.code != exitOK || err != nil {
		t.Fatalf("run --config --rank: exit %d, %v: %s", c.code, err, c.stderr)
	}
	if k := crep.Rank; k == nil || !crep.Served || k.FitWeightBytes != 0 || k.LedgerBytes != k.FitArenaBytes+k.FitKVBytes || len(crep.InvariantsFailed) != 0 {
		t.Errorf("run --config --rank (no weights): served %v, rank %+v, invariants failed %v", crep.Served, k, crep.InvariantsFailed)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--rank", "0"}, "--tensor-parallel-size"},
		{[]string{"--rank", "2", "--tensor-parallel-size", "2"}, "ranks 0 to 1"},
		{[]string{"--rank", "0", "--tensor-parallel-size", "2", "--devices", "2"}, "leave out --devices"},
		{[]string{"--rank", "0", "--tensor-parallel-size", "2", "--layout", "discrete"}, "pooled"},
	} {
		e := cli(t, append([]string{"run", "--model", gen.Dir}, bad.args...)...)
		if e.code == exitOK || !strings.Contains(e.stderr, bad.want) {
			t.Errorf("run %v: exit %d, stderr %q; want an error naming %q", bad.args, e.code, e.stderr, bad.want)
		}
	}
}
