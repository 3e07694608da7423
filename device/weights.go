package device

import (
	"time"

	"github.com/gpuarena/gpuarena/checkpoint"
)

// WeightsPoolLabel is the ledger label of a pooled weights load's one
// allocation (owner WeightsOwner); each tensor is a view of it labelled with
// the tensor's name.
const WeightsPoolLabel = "weights_pool"

// WeightTensor is one weight tensor on the device: Bytes bytes at Ptr, its
// elements of DType in row-major order with dimensions Shape, as the
// checkpoint stored them (safetensors: little-endian, C order).
type WeightTensor struct {
	// Name is the tensor's name in the checkpoint
	// ("model.layers.0.self_attn.q_proj.weight"), and its ledger label.
	Name string `json:"name"`
	// DType is the element type, as the checkpoint's header gave it
	// (checkpoint.BF16, checkpoint.F8E4M3, …): the bytes are uploaded
	// unchanged.
	DType checkpoint.DType `json:"dtype"`
	// Shape is the dimensions, outermost first; empty for a scalar.
	Shape []int64 `json:"shape"`
	// Ptr is the tensor's device pointer, 0 (NULL) for a tensor of 0 bytes.
	// In a pooled load it is 256-byte aligned (PoolAlign of package arena).
	Ptr DevicePtr `json:"ptr"`
	// Bytes is the tensor's size in bytes.
	Bytes int64 `json:"bytes"`
}

// Weights are the tensors of a checkpoint loaded onto the device by
// gpuarena.Manager.LoadWeights, held by WeightsOwner. Treat it as read-only;
// the ledger, not this value, decides what a release frees.
type Weights struct {
	// Layout is how the tensors were allocated: LayoutPooled (one
	// allocation, each tensor a 256-byte-aligned view of it, labelled
	// WeightsPoolLabel) or LayoutDiscrete (one allocation per tensor,
	// labelled with its name).
	Layout Layout `json:"layout"`
	// Pool is the pooled load's allocation and PoolBytes its size in bytes
	// (the tensors at their aligned offsets, rounded up to 256 B); 0 for a
	// discrete load.
	Pool      DevicePtr `json:"pool,omitempty"`
	PoolBytes int64     `json:"pool_bytes,omitempty"`
	// Bytes is the sum of the tensors' bytes (the checkpoint's total);
	// AllocatedBytes what the load holds on the device: PoolBytes, or Bytes
	// for a discrete load. The difference is alignment padding.
	Bytes          int64 `json:"bytes"`
	AllocatedBytes int64 `json:"allocated_bytes"`
	// Tensors are the tensors in the checkpoint's order (by shard, then
	// offset).
	Tensors []WeightTensor `json:"tensors"`
	// Load is how long the load took, from Open to the last byte copied.
	Load time.Duration `json:"load_ns"`

	byName map[string]int
}

// NewWeights returns the Weights of tensors (kept, not copied) laid out as
// layout, with pool and poolBytes for a pooled load. Loaders make it; an
// embedder gets it from LoadWeights.
func NewWeights(layout Layout, pool DevicePtr, poolBytes int64, tensors []WeightTensor) *Weights {
	w := &Weights{Layout: layout, Pool: pool, PoolBytes: poolBytes, Tensors: tensors, byName: make(map[string]int, len(tensors))}
	for i, t := range tensors {
		w.byName[t.Name] = i
		w.Bytes += t.Bytes
	}
	w.AllocatedBytes = poolBytes
	if layout != LayoutPooled {
		w.AllocatedBytes = w.Bytes
	}
	return w
}

// Tensor returns the tensor called name, and false when the load has none.
func (w *Weights) Tensor(name string) (WeightTensor, bool) {
	i, ok := w.byName[name]
	if !ok {
		return WeightTensor{}, false
	}
	return w.Tensors[i], true
}

// LoadProgress is what a weights load reports after each chunk it copied to
// the device.
type LoadProgress struct {
	// BytesDone of BytesTotal tensor bytes are on the device.
	BytesDone  int64 `json:"bytes_done"`
	BytesTotal int64 `json:"bytes_total"`
	// Tensor is the tensor the last chunk ended in.
	Tensor string `json:"tensor"`
	// Elapsed is the time since the upload started; BytesPerSecond is
	// BytesDone / Elapsed.
	Elapsed        time.Duration `json:"elapsed_ns"`
	BytesPerSecond float64       `json:"bytes_per_second"`
}
