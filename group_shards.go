package gpuarena

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
)

// LoadWeightsSharded loads one checkpoint onto every rank, each rank only
// its shard: the model folder at path (config.json and its safetensors
// checkpoint, as a Hugging Face export holds them) is split by layout, a
// vLLM layout of exactly Ranks GPUs (rank r is global rank r,
// arena.RankIndex), by arena.RankShards' rules (column- and row-parallel
// slices, KV heads, the padded vocabulary, experts, pipeline stages), and
// each rank allocates its tensors (the shard's shape: arena.TensorShard
// RankShape) and reads only their byte ranges, through
// gpuworker.Worker.LoadWeightRanges (pread per range, ranges packed into the
// load's chunks). The file is opened once and read by every rank at once.
// wopts are the weight formats the checkpoint was written with, as for
// arena.CheckpointTensors (the zero value: as config.json says).
//
// It is all or nothing across ranks: when any rank's load fails, the
// weights the other ranks loaded are freed, and the error names every
// failed rank (*RankError, joined in rank order).
// A WithLoadProgress callback is called by every rank's load,
// concurrently: it must be safe for that.
//
// Errors, with no weights on any rank: those of arena.LoadConfig and
// checkpoint.Open; those of arena.RankShards (an *arena.ParallelError for a
// layout the model does not split, or whose split is not modelled);
// ErrInvalidValue for a layout of another GPU count than Ranks, a nil or
// bad option, or a checkpoint whose tensors are not the ones its config
// lists (names, dtypes, shapes); each rank's LoadWeightRanges errors in
// *RankErrors (ErrOutOfMemory, the context's error, checkpoint.ErrRead);
// ErrReentrant.
func (g *Group) LoadWeightsSharded(ctx context.Context, path string, layout arena.ParallelLayout, wopts arena.WeightOptions, opts ...LoadOption) ([]*device.Weights, error) {
	if err := g.checkCaller(); err != nil {
		return nil, err
	}
	if n := layout.GPUs(); n != int64(len(g.ranks)) {
		return nil, fmt.Errorf("group load weights sharded: %w: layout %s has %d GPUs for %d ranks; use a layout of %d GPUs", ErrInvalidValue, layout, n, len(g.ranks), len(g.ranks))
	}
	o, err := loadOptions("group load weights sharded", opts)
	if err != nil {
		return nil, err
	}
	ranks := make([]int64, len(g.ranks))
	for r := range ranks {
		ranks[r] = int64(r)
	}
	ck, tensors, err := openRankShards(path, layout, wopts, ranks)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	ws := make([]*device.Weights, len(g.ranks))
	err = g.each("load weights sharded", func(r int, m *Manager) error {
		w, err := m.worker.LoadWeightRanges(ctx, ck, tensors[r], o)
		ws[r] = w
		return err
	})
	if err == nil {
		for r, w := range ws {
			g.ranks[r].logger.Info("gpuarena: weight shard loaded", "path", path, "layout", layout.String(), "rank", r,
				"tensors", len(w.Tensors), "bytes", w.Bytes, "allocated_bytes", w.AllocatedBytes, "duration", w.Load)
		}
		return ws, nil
	}
	return nil, g.rollBackWeights(ws, err)
}

// matchListing checks that ck holds exactly the tensors of listing (one
// rank's shards: every tensor of the model, absent ones too), with their
// dtypes and shapes, so that every rank's byte ranges are those of the
// tensors it means. Errors: ErrInvalidValue naming the first tensor that
// differs.
func matchListing(ck *checkpoint.Checkpoint, listing []arena.TensorShard) error {
	if ck.Len() != len(listing) {
		return fmt.Errorf("load weight shards: %w: the checkpoint %s holds %d tensors, its config lists %d", ErrInvalidValue, ck.Index(), ck.Len(), len(listing))
	}
	for _, s := range listing {
		t, ok := ck.Tensor(s.Name)
		switch {
		case !ok:
			return fmt.Errorf("load weight shards: %w: the config lists tensor %q, the checkpoint %s does not hold it", ErrInvalidValue, s.Name, ck.Index())
		case t.DType != s.DType || !slices.Equal(t.Shape, s.Shape):
			return fmt.Errorf("load weight shards: %w: tensor %q is %v %v in the checkpoint, %v %v by its config", ErrInvalidValue, s.Name, t.DType, t.Shape, s.DType, s.Shape)
		}
	}
	return nil
}
