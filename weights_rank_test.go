package gpuarena_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/internal/modelgen"
)

// One Manager loads one rank's shard: each tensor the file's slice for
// that rank, nothing of the tensors the rank does not hold, the ledger the
// shard's pooled bytes; a rank outside the layout allocates nothing.
func TestLoadWeightsRank(t *testing.T) {
	res := modelgen.ForTest(t, "internal/modelgen/testdata/tiny-qwen3-moe.json", modelgen.Options{Seed: 9, ShardBytes: 300_000})
	l := arena.ParallelLayout{TensorParallelSize: 2, PipelineParallelSize: 2}
	cfg, err := arena.LoadConfig(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := gpuarena.New(quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	var oe *arena.OptionError
	if _, err := m.LoadWeightsRank(ctx, res.Dir, l, 4, arena.WeightOptions{}); !errors.As(err, &oe) || oe.Option != "rank" {
		t.Errorf("rank 4 of 4: %v, want an *arena.OptionError for rank", err)
	}
	const rank = 3 // the last stage's second tensor-parallel rank
	w, err := m.LoadWeightsRank(ctx, res.Dir, l, rank, arena.WeightOptions{}, gpuarena.WithLoadChunkBytes(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	shards, err := arena.RankShards(cfg, arena.WeightOptions{}, l, rank)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, s := range shards {
		if s.Kind != arena.ShardAbsent {
			sizes = append(sizes, s.RankBytes())
		}
	}
	pooled, err := arena.PooledBytes(sizes)
	if err != nil {
		t.Fatal(err)
	}
	led, err := m.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if led.Counters.CurrentBytes != pooled || w.AllocatedBytes != pooled || len(w.Tensors) != len(sizes) {
		t.Fatalf("ledger %d B, allocated %d B, %d tensors; want the shard's %d pooled B in %d tensors", led.Counters.CurrentBytes, w.AllocatedBytes, len(w.Tensors), pooled, len(sizes))
	}
	if _, err := m.BuildArena(ctx, plans(1)[0]); err != nil { // Forward needs one
		t.Fatal(err)
	}
	got := deviceTensors(t, m, w)
	for _, s := range shards {
		b, ok := got[s.Name]
		switch {
		case s.Kind == arena.ShardAbsent && ok:
			t.Errorf("%s: loaded, absent from rank %d's shard", s.Name, rank)
		case s.Kind != arena.ShardAbsent && !bytes.Equal(b, fileSlice(t, ck, s)):
			t.Errorf("%s (%v): differs from the file's slice", s.Name, s.Kind)
		}
	}
}
