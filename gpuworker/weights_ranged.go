package gpuworker

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// RangedTensor is one device tensor of LoadWeightRanges: part of a
// checkpoint tensor, such as a rank's shard (arena.TensorShard).
type RangedTensor struct {
	// Name is the checkpoint tensor read, and the device tensor's name.
	Name string
	// DType is the element type, the checkpoint tensor's; Shape the device
	// tensor's dimensions, outermost first.
	DType checkpoint.DType
	Shape []int64
	// Ranges are the byte ranges of the checkpoint tensor (offsets from its
	// first byte) the device tensor holds, back to back from its first
	// byte: none empty, no two sharing a byte. Their sum is at most
	// Shape's bytes; the bytes past it (a vocabulary shard's padding rows)
	// are set to zero, as vLLM's VocabParallelEmbedding.weight_loader
	// fills them (vllm/model_executor/layers/vocab_parallel_embedding.py).
	Ranges []arena.ByteRange
}

// RangedTensors is the device tensors of a rank's shards, in order, the
// absent ones left out: what LoadWeightRanges takes.
func RangedTensors(shards []arena.TensorShard) []RangedTensor {
	out := make([]RangedTensor, 0, len(shards))
	for _, s := range shards {
		if s.Kind != arena.ShardAbsent {
			out = append(out, RangedTensor{Name: s.Name, DType: s.DType, Shape: s.RankShape, Ranges: s.ByteRanges()})
		}
	}
	return out
}

// LoadWeightRanges is LoadWeights of part of ck: every tensor of tensors
// allocated on the device (held by device.WeightsOwner, labelled with its
// name, all or nothing and checked against the budget first) and only its
// byte ranges read from the files (pread, never the whole tensor) through
// the same chunks, readers and staging buffers; ranges smaller than a
// chunk, such as the rows of a dim-1 slice, share chunks. A tensor's bytes
// past its ranges (a vocabulary shard's padding rows) are zero-filled on
// the GPU thread as part of the allocation request (the AllocBatch
// zero-fill, one memset per tensor), before any copy. The returned
// Weights hold the device tensors (Bytes: their shapes' bytes), in the
// order given.
//
// Errors: ErrInvalidValue for a nil checkpoint, a bad option, a tensor
// named twice, one ck does not hold or holds in another dtype, a shape
// whose bytes are not whole or pass 2^63−1, a range outside the file's
// tensor, an empty range, two ranges that overlap, or ranges more than the
// shape holds; then those of LoadWeights, with nothing left allocated.
func (w *Worker) LoadWeightRanges(ctx context.Context, ck *checkpoint.Checkpoint, tensors []RangedTensor, opts LoadOptions) (*device.Weights, error) {
	if ck == nil {
		return nil, fmt.Errorf("load weight ranges: %w: nil checkpoint", ErrInvalidValue)
	}
	dev := make([]checkpoint.Tensor, len(tensors))
	ranges := make([][]arena.ByteRange, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		src, ok := ck.Tensor(t.Name)
		switch {
		case !ok:
			return nil, fmt.Errorf("load weight ranges: %w: tensor %q is not in the checkpoint %s", ErrInvalidValue, t.Name, ck.Index())
		case seen[t.Name]:
			return nil, fmt.Errorf("load weight ranges: %w: tensor %q is named twice", ErrInvalidValue, t.Name)
		case src.DType != t.DType:
			return nil, fmt.Errorf("load weight ranges: %w: tensor %q is %v in the checkpoint, %v asked", ErrInvalidValue, t.Name, src.DType, t.DType)
		}
		seen[t.Name] = true
		n, err := rangedBytes(t)
		if err != nil {
			return nil, err
		}
		var sum int64
		for _, r := range t.Ranges {
			if r.Offset < 0 || r.Bytes < 0 || r.Offset > src.Bytes || r.Bytes > src.Bytes-r.Offset {
				return nil, fmt.Errorf("load weight ranges: %w: tensor %q: range [%d, +%d) is outside its %d B", ErrInvalidValue, t.Name, r.Offset, r.Bytes, src.Bytes)
			}
			if r.Bytes == 0 {
				return nil, fmt.Errorf("load weight ranges: %w: tensor %q: range [%d, +0) is empty; leave it out", ErrInvalidValue, t.Name, r.Offset)
			}
			sum += r.Bytes // each ≤ src.Bytes; more than n stops the sum below 2^63
			if sum > n {
				return nil, fmt.Errorf("load weight ranges: %w: tensor %q: its ranges hold more than its shape %v's %d B", ErrInvalidValue, t.Name, t.Shape, n)
			}
		}
		if err := checkDisjoint(t.Name, t.Ranges); err != nil {
			return nil, err
		}
		dev[i] = checkpoint.Tensor{Name: t.Name, DType: t.DType, Shape: slices.Clone(t.Shape), Bytes: n}
		ranges[i] = t.Ranges
	}
	return w.load(ctx, ck, dev, ranges, opts)
}

// zeroPastRanges adds to the allocation items of weightLayout the
// zero-fill of each device tensor's bytes past the sum of its ranges: in
// the pool at the tensor's offset (wt's Ptr, an offset until the pool is
// allocated) plus that sum; discrete, at that sum in the tensor's own
// item (one per non-empty tensor, in order).
func zeroPastRanges(items []messages.AllocItem, wt []device.WeightTensor, ranges [][]arena.ByteRange, layout device.Layout) {
	k := 0
	for i, t := range wt {
		if t.Bytes == 0 {
			continue
		}
		var written int64
		for _, r := range ranges[i] {
			written += r.Bytes
		}
		if written < t.Bytes {
			if layout == device.LayoutDiscrete {
				items[k].Zero = append(items[k].Zero, messages.ByteRange{Offset: written, Bytes: t.Bytes - written})
			} else {
				items[0].Zero = append(items[0].Zero, messages.ByteRange{Offset: int64(t.Ptr) + written, Bytes: t.Bytes - written})
			}
		}
		k++
	}
}

// checkDisjoint returns ErrInvalidValue, naming both, when two of ranges
// (each inside the tensor, so no end passes 2^63) share a byte: a device
// tensor holds each byte of the file's tensor at most once.
func checkDisjoint(name string, ranges []arena.ByteRange) error {
	if len(ranges) < 2 {
		return nil
	}
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b arena.ByteRange) int { return cmp.Compare(a.Offset, b.Offset) })
	for i := 1; i < len(rs); i++ {
		if p := rs[i-1]; p.Offset+p.Bytes > rs[i].Offset {
			return fmt.Errorf("load weight ranges: %w: tensor %q: ranges [%d, +%d) and [%d, +%d) overlap", ErrInvalidValue, name, p.Offset, p.Bytes, rs[i].Offset, rs[i].Bytes)
		}
	}
	return nil
}

// rangedBytes is t's shape's bytes. Errors: ErrInvalidValue for an invalid
// dtype, a negative dimension, bytes that are not whole or pass 2^63−1.
func rangedBytes(t RangedTensor) (int64, error) {
	if !t.DType.Valid() || slices.ContainsFunc(t.Shape, func(d int64) bool { return d < 0 }) {
		return 0, fmt.Errorf("load weight ranges: %w: tensor %q: dtype %v, shape %v", ErrInvalidValue, t.Name, t.DType, t.Shape)
	}
	dims := append([]int64{int64(t.DType.Bits())}, t.Shape...)
	bits, err := arena.CheckedProduct(t.Name, dims...)
	if err != nil {
		return 0, fmt.Errorf("load weight ranges: %w: tensor %q shape %v: %w", ErrInvalidValue, t.Name, t.Shape, err)
	}
	if bits%8 != 0 {
		return 0, fmt.Errorf("load weight ranges: %w: tensor %q shape %v of %v is not whole bytes", ErrInvalidValue, t.Name, t.Shape, t.DType)
	}
	return bits / 8, nil
}
