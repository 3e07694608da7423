package gpuarena

import (
	"context"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// LoadOption configures one LoadWeights.
type LoadOption func(*gpuworker.LoadOptions)

// WithWeightsLayout chooses how LoadWeights allocates: device.LayoutPooled
// (the default: one allocation, each tensor a 256-byte-aligned view of it)
// or device.LayoutDiscrete (one allocation per tensor, for memory checkers).
// Any other value makes LoadWeights return ErrInvalidValue.
func WithWeightsLayout(l device.Layout) LoadOption {
	return func(o *gpuworker.LoadOptions) { o.Layout = l }
}

// WithLoadChunkBytes sets the size of each of the load's host staging
// buffers (readers + 2 of them, page-locked on the cuda backend), in bytes,
// in [0, gpuworker.MaxLoadChunkBytes]; 0 (and leaving it out) means
// gpuworker.DefaultLoadChunkBytes (4 MiB). Out of range, LoadWeights
// returns ErrInvalidValue.
func WithLoadChunkBytes(n int64) LoadOption {
	return func(o *gpuworker.LoadOptions) { o.ChunkBytes = n }
}

// WithLoadReaders sets how many goroutines read the checkpoint's files in
// parallel, in [0, gpuworker.MaxLoadReaders]; 0 (and leaving it out) means
// gpuworker.DefaultLoadReaders (16). Out of range, LoadWeights returns
// ErrInvalidValue.
func WithLoadReaders(n int) LoadOption {
	return func(o *gpuworker.LoadOptions) { o.Readers = n }
}

// WithLoadProgress calls f on LoadWeights' goroutine after each chunk
// reached the device, with the bytes done and total, the tensor the chunk
// ended in and the rate. f may cancel the load's context: the load then
// stops before the next chunk and frees what it allocated.
func WithLoadProgress(f func(device.LoadProgress)) LoadOption {
	return func(o *gpuworker.LoadOptions) { o.Progress = f }
}

// LoadWeights loads the safetensors checkpoint at path — a model folder (its
// model.safetensors.index.json or model.safetensors), an index, or one
// .safetensors file — onto the device, held in the ledger by
// device.WeightsOwner with each tensor labelled by its name, and returns
// where each tensor is (device.Weights.Tensor: pointer, dtype, shape), for
// forward steps.
//
// Every header is checked before anything is allocated (checkpoint.Open);
// the tensors are then allocated all or nothing, the whole checked against
// the budget before the driver is called, and copied up in chunks through
// the GPU thread while the next chunks are read from disk by parallel
// readers; on the cuda backend from page-locked buffers, asynchronously (see
// gpuworker.Worker.LoadWeights). Release and Close free the weights.
//
// Errors, with nothing left allocated: a *checkpoint.Error for a bad or
// missing checkpoint (errors.Is checkpoint.ErrTruncated, ErrBadHeader,
// ErrUnknownDType, ErrShapeMismatch, ErrOverlap, ErrMissingShard,
// ErrDuplicateTensor, …; it names the file and tensor); an
// *gpuworker.OutOfMemoryError (ErrOutOfMemory, OverBudget, ShortfallBytes)
// when the weights would pass the budget or the device; the context's
// error, wrapped in one that says the load stopped and freed what it had
// allocated, when ctx is done before the last chunk; ErrInvalidValue for a
// bad option; ErrClosed; ErrReentrant.
func (m *Manager) LoadWeights(ctx context.Context, path string, opts ...LoadOption) (*device.Weights, error) {
	if err := m.worker.CheckCaller(); err != nil {
		return nil, err
	}
	o, err := loadOptions("load weights", opts)
	if err != nil {
		return nil, err
	}
	ck, err := checkpoint.Open(path)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	w, err := m.worker.LoadWeights(ctx, ck, o)
	if err != nil {
		return nil, err
	}
	m.logger.Info("gpuarena: weights loaded", "path", path, "tensors", len(w.Tensors), "bytes", w.Bytes,
		"allocated_bytes", w.AllocatedBytes, "duration", w.Load)
	return w, nil
}
