package gpuarena

import (
	"context"
	"fmt"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// LoadWeightsRank loads one rank's shard of a model onto this device: the
// model folder at path (config.json and its safetensors checkpoint) split
// by layout as Group.LoadWeightsSharded splits it (arena.RankShards: column-
// and row-parallel slices, KV heads, the padded vocabulary, experts,
// pipeline stages), rank being the global rank (arena.RankIndex) whose
// tensors this device allocates (each its shard's shape) and whose byte
// ranges it reads, and nothing else. It is how one process per rank loads
// its share (the way vLLM's workers each load theirs), and how one GPU
// rehearses the heaviest rank of a layout it does not have the GPUs for;
// the per-rank fit is arena.FitRanks, with the shard's exact sizes
// arena.FitRank.
//
// Errors, with nothing left allocated: those of arena.LoadConfig and
// checkpoint.Open; an *arena.OptionError for a rank outside [0,
// layout.GPUs()); those of arena.RankShards (an *arena.ParallelError for a
// layout the model does not split); ErrInvalidValue for a nil or bad
// option or a checkpoint whose tensors are not the ones its config lists;
// then LoadWeights' (ErrOutOfMemory, the context's error, checkpoint.ErrRead,
// ErrClosed, ErrReentrant).
func (m *Manager) LoadWeightsRank(ctx context.Context, path string, layout arena.ParallelLayout, rank int64, wopts arena.WeightOptions, opts ...LoadOption) (*device.Weights, error) {
	if err := m.worker.CheckCaller(); err != nil {
		return nil, err
	}
	o, err := loadOptions("load weights rank", opts)
	if err != nil {
		return nil, err
	}
	if n := layout.GPUs(); rank < 0 || rank >= n {
		return nil, &arena.OptionError{Option: "rank", Value: rank, Reason: fmt.Sprintf("layout %s has ranks 0 to %d", layout, n-1)}
	}
	ck, tensors, err := openRankShards(path, layout, wopts, []int64{rank})
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	w, err := m.worker.LoadWeightRanges(ctx, ck, tensors[0], o)
	if err != nil {
		return nil, err
	}
	m.logger.Info("gpuarena: weight shard loaded", "path", path, "layout", layout.String(), "rank", rank,
		"tensors", len(w.Tensors), "bytes", w.Bytes, "allocated_bytes", w.AllocatedBytes, "duration", w.Load)
	return w, nil
}

// loadOptions applies opts to the zero LoadOptions and validates them.
// Errors: ErrInvalidValue for a nil option (what names the call), and
// LoadOptions.Validate's.
func loadOptions(what string, opts []LoadOption) (gpuworker.LoadOptions, error) {
	var o gpuworker.LoadOptions
	for i, f := range opts {
		if f == nil {
			return o, fmt.Errorf("%s: %w: option %d is nil", what, ErrInvalidValue, i+1)
		}
		f(&o)
	}
	return o, o.Validate()
}

// openRankShards opens the model folder at path and splits it by layout:
// for each of ranks, the tensors it loads (arena.RankShards as
// gpuworker.RangedTensors), after checking that the checkpoint holds
// exactly the tensors its config lists. The caller closes the checkpoint.
// Errors: arena.LoadConfig's, arena.RankShards', checkpoint.Open's and
// matchListing's.
func openRankShards(path string, layout arena.ParallelLayout, wopts arena.WeightOptions, ranks []int64) (*checkpoint.Checkpoint, [][]gpuworker.RangedTensor, error) {
	cfg, err := arena.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	tensors := make([][]gpuworker.RangedTensor, len(ranks))
	var listing []arena.TensorShard
	for i, r := range ranks {
		shards, err := arena.RankShards(cfg, wopts, layout, r)
		if err != nil {
			return nil, nil, err
		}
		tensors[i], listing = gpuworker.RangedTensors(shards), shards
	}
	ck, err := checkpoint.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if err := matchListing(ck, listing); err != nil {
		_ = ck.Close() // read-only: its error changes nothing
		return nil, nil, err
	}
	return ck, tensors, nil
}
