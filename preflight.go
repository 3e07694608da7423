package gpuarena

import (
	"context"
	"fmt"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// PreflightOption configures one Preflight.
type PreflightOption func(*preflightConfig)

type preflightConfig struct {
	weightsPath   string
	weightsLayout device.Layout
	weightsSet    bool
	reserve       int64
}

// PreflightWeights counts the checkpoint at path (as LoadWeights takes it)
// with the exact bytes a LoadWeights of it with layout ("" is pooled) will
// allocate, read from its headers (nothing else of the files is read).
// Pooled, the report gives the tensors (CheckpointWeightBytes) and the
// pool's alignment padding (WeightPaddingBytes) apart; discrete, the
// tensors alone (there is no padding). Without it the fit counts the
// weights as arena.EstimateWeights sizes them
// from cfg. Leave it out for weights already loaded: the ledger holds them,
// and Preflight counts what the ledger holds.
func PreflightWeights(path string, layout device.Layout) PreflightOption {
	return func(c *preflightConfig) { c.weightsPath, c.weightsLayout, c.weightsSet = path, layout, true }
}

// PreflightReserve holds back bytes (≥ 0) for device memory this process
// will use outside the ledger: cuBLAS workspaces, CUDA graphs, kernels'
// own allocations. Default 0: the backend's context was opened before the
// budget was taken (New), so it is already counted as used; the fit's own
// default of 1 GiB (arena.DefaultReserveBytes) is for a device state read
// before the process opened the device.
func PreflightReserve(bytes int64) PreflightOption {
	return func(c *preflightConfig) { c.reserve = bytes }
}

// Preflight fits plan, cfg's weights and one sequence of the plan's
// max_seq_len of KV cache on this manager's device as it is now, with the
// manager's gpu_memory_utilization, through arena.Fit and so arena.Budget,
// the budget function the GPU actor enforces.
//
// The device state it fits against is the GPU worker's: total memory from
// the device; as used, what other processes held when the manager started
// (or hold now, if more: MemInfo) plus everything the ledger holds now. So
// the report's ProcessBudgetBytes is what the worker will still allocate,
// and a report that fits guarantees that a LoadWeights of the counted
// checkpoint (PreflightWeights) and a BuildArena of plan, made next on this
// device state, both succeed: weights + arena + slabs + reserve + one
// sequence ≤ the budget left. One that does not fit says by how much
// (ShortfallBytes) and what to change (Suggestions). The plan's arena is
// counted as a pooled arena (the discrete layout needs no more).
//
// Errors: ErrInvalidValue for a nil option or a negative reserve; a
// *checkpoint.Error for the weights' checkpoint; arena.Fit's (a nil plan or
// cfg, a cfg of another model_type); ErrClosed, ErrReentrant, the
// context's.
func (m *Manager) Preflight(ctx context.Context, plan *arena.Plan, cfg *arena.ModelConfig, opts ...PreflightOption) (*arena.FitReport, error) {
	if err := m.worker.CheckCaller(); err != nil {
		return nil, err
	}
	var c preflightConfig
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("preflight: %w: option %d is nil", ErrInvalidValue, i+1)
		}
		o(&c)
	}
	if c.reserve < 0 {
		return nil, fmt.Errorf("preflight: reserve of %d B: %w: must be ≥ 0", c.reserve, ErrInvalidValue)
	}
	// The manager's loader uploads the checkpoint's bytes unchanged, so the
	// weights are sized as the checkpoint stores them (no engine padding,
	// such as vLLM's MXFP4 tiles) also when no checkpoint is given.
	fo := arena.FitOptions{GPUMemoryUtilization: &m.utilization, ReserveBytes: &c.reserve,
		Weights: arena.WeightOptions{CheckpointLayout: true}}
	if c.weightsSet {
		ck, err := checkpoint.Open(c.weightsPath)
		if err != nil {
			return nil, err
		}
		if c.weightsLayout == "" || c.weightsLayout == device.LayoutPooled {
			// The fit counts the tensors and the pool's padding apart, by
			// the rule the pooled load allocates with (arena.PoolOffsets).
			fo.CheckpointPooledTensorBytes = gpuworker.TensorBytes(ck.Tensors())
			ck.Close()
		} else {
			n, err := gpuworker.WeightsAllocatedBytes(ck, c.weightsLayout)
			ck.Close()
			if err != nil {
				return nil, err
			}
			fo.CheckpointWeightBytes = &n
		}
	}
	dev, err := m.fitDevice(ctx)
	if err != nil {
		return nil, err
	}
	return arena.Fit(plan, cfg, dev, fo)
}

// fitDevice is the device state a preflight fits against: the device's
// total, and as used the most other processes have held (at New, from the
// budget; now, from MemInfo) plus what the ledger holds.
func (m *Manager) fitDevice(ctx context.Context) (arena.DeviceMemory, error) {
	free, total, err := m.worker.MemInfo(ctx)
	if err != nil {
		return arena.DeviceMemory{}, err
	}
	l, err := m.worker.Ledger(ctx)
	if err != nil {
		return arena.DeviceMemory{}, err
	}
	held := l.Counters.CurrentBytes
	// ⌊u × total⌋ is Budget with nobody else on the device; the worker's
	// budget is that less what others held at New.
	capBytes, err := arena.Budget(m.utilization, total, 0)
	if err != nil {
		return arena.DeviceMemory{}, err
	}
	others := max(capBytes-m.worker.Budget(), total-free-held, 0)
	used := min(others+held, total)
	return arena.DeviceMemory{TotalBytes: total, FreeBytes: total - used}, nil
}
