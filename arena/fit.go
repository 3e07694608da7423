package arena

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"slices"
	"strconv"
)

// DefaultGPUMemoryUtilization is the default fraction of the device's total
// memory this process may hold (design.md §6).
const DefaultGPUMemoryUtilization = 0.90

// DeviceMemory is a device's memory as the driver reports it (cuMemGetInfo),
// in bytes.
type DeviceMemory struct {
	// TotalBytes is the device's total memory.
	TotalBytes int64
	// FreeBytes is what is free now; TotalBytes − FreeBytes is used by others.
	FreeBytes int64
}

// FitReport is the preflight fit of a Plan on a device (design.md §6). All
// sizes are in bytes. Budget = ⌊gpu_memory_utilization × total⌋; memory used
// by others (total − free) counts against it; what the arena and slabs leave
// goes to KV-cache blocks.
type FitReport struct {
	// Fits: RequiredBytes ≤ BudgetBytes, i.e. the arena, the slabs and the KV
	// blocks of one max_seq_len sequence fit next to what others use.
	Fits bool
	// GPUMemoryUtilization is the fraction the budget was computed with.
	GPUMemoryUtilization float64
	// Device is the device state the fit was computed for.
	Device DeviceMemory
	// BudgetBytes is ⌊GPUMemoryUtilization × Device.TotalBytes⌋ (the
	// utilization taken as its shortest decimal form, so 0.7 is exactly 7/10).
	BudgetBytes int64
	// UsedByOthersBytes is Device.TotalBytes − Device.FreeBytes.
	UsedByOthersBytes int64
	// ArenaBytes is Plan.BufferBytes; SlabBytes is Plan.SlabBytes.
	ArenaBytes int64
	SlabBytes  int64
	// KVBytesPerBlock is KVBytesPerBlock(cfg, kv_block_size); 0 for a model
	// without KV-cache layers.
	KVBytesPerBlock int64
	// MinKVBlocks is ⌈max_seq_len / kv_block_size⌉ blocks, one longest
	// sequence; 0 when KVBytesPerBlock is 0.
	MinKVBlocks int64
	// KVBlocks is ⌊(BudgetBytes − UsedByOthersBytes − ArenaBytes − SlabBytes)
	// / KVBytesPerBlock⌋, 0 when that is negative; KVCacheBytes is
	// KVBlocks × KVBytesPerBlock and KVTokens KVBlocks × kv_block_size.
	KVBlocks     int64
	KVCacheBytes int64
	KVTokens     int64
	// RequiredBytes is UsedByOthersBytes + ArenaBytes + SlabBytes +
	// MinKVBlocks × KVBytesPerBlock.
	RequiredBytes int64
	// HeadroomBytes is BudgetBytes − RequiredBytes when it fits (the KV
	// cache takes it as extra blocks), else 0.
	HeadroomBytes int64
	// ShortfallBytes is RequiredBytes − BudgetBytes when it does not fit, else 0.
	ShortfallBytes int64
	// Largest is the plan's three largest buffers, largest first.
	Largest []Buffer
	// Notes says what the fit counted against the budget and what it left out.
	Notes []string
}

// Fit checks whether plan (for cfg) fits on dev under gpuMemoryUtilization.
// Errors: an *OptionError for gpu_memory_utilization outside (0, 1],
// total_bytes ≤ 0, or free_bytes outside [0, total_bytes]; a *ConfigError for
// a nil or mismatched cfg; an *OverflowError.
func Fit(plan *Plan, cfg *ModelConfig, dev DeviceMemory, gpuMemoryUtilization float64) (*FitReport, error) {
	switch {
	case plan == nil:
		return nil, fmt.Errorf("arena: Fit: nil *Plan")
	case cfg == nil:
		return nil, &ConfigError{Reason: "nil *ModelConfig"}
	case cfg.ModelType != plan.ModelType:
		return nil, &ConfigError{Field: "model_type", Value: cfg.ModelType,
			Reason: fmt.Sprintf("does not match the plan's %q", plan.ModelType)}
	case math.IsNaN(gpuMemoryUtilization) || gpuMemoryUtilization <= 0 || gpuMemoryUtilization > 1:
		return nil, &OptionError{Option: "gpu_memory_utilization", Value: gpuMemoryUtilization, Reason: "must be in (0, 1]"}
	case dev.TotalBytes <= 0:
		return nil, &OptionError{Option: "total_bytes", Value: dev.TotalBytes, Reason: "must be positive"}
	case dev.FreeBytes < 0 || dev.FreeBytes > dev.TotalBytes:
		return nil, &OptionError{Option: "free_bytes", Value: dev.FreeBytes,
			Reason: fmt.Sprintf("must be in [0, total_bytes = %d]", dev.TotalBytes)}
	}
	r := &FitReport{
		GPUMemoryUtilization: gpuMemoryUtilization,
		Device:               dev,
		BudgetBytes:          budget(gpuMemoryUtilization, dev.TotalBytes),
		UsedByOthersBytes:    dev.TotalBytes - dev.FreeBytes,
		ArenaBytes:           plan.BufferBytes,
		SlabBytes:            plan.SlabBytes,
		Largest:              largestBuffers(plan, 3),
	}
	var err error
	if r.KVBytesPerBlock, err = KVBytesPerBlock(cfg, plan.Options.KVBlockSize); err != nil {
		return nil, err
	}
	committed, err := CheckedSum("fit committed bytes", r.UsedByOthersBytes, r.ArenaBytes, r.SlabBytes)
	if err != nil {
		return nil, err
	}
	minKV := int64(0)
	if r.KVBytesPerBlock > 0 {
		r.MinKVBlocks = ceilDiv(plan.Options.MaxSeqLen, plan.Options.KVBlockSize)
		if minKV, err = CheckedMul("fit minimum kv bytes", r.MinKVBlocks, r.KVBytesPerBlock); err != nil {
			return nil, err
		}
		if left := r.BudgetBytes - committed; left > 0 {
			r.KVBlocks = left / r.KVBytesPerBlock
			r.KVCacheBytes = r.KVBlocks * r.KVBytesPerBlock // ≤ left, cannot overflow
			if r.KVTokens, err = CheckedMul("fit kv tokens", r.KVBlocks, plan.Options.KVBlockSize); err != nil {
				return nil, err
			}
		}
	}
	if r.RequiredBytes, err = CheckedAdd("fit required bytes", committed, minKV); err != nil {
		return nil, err
	}
	r.Fits = r.RequiredBytes <= r.BudgetBytes
	if r.Fits {
		r.HeadroomBytes = r.BudgetBytes - r.RequiredBytes
	} else {
		r.ShortfallBytes = r.RequiredBytes - r.BudgetBytes
	}
	r.Notes = fitNotes(r, cfg)
	return r, nil
}

// budget is ⌊util × total⌋ computed exactly, util read as its shortest decimal.
func budget(util float64, total int64) int64 {
	u, _ := new(big.Rat).SetString(strconv.FormatFloat(util, 'g', -1, 64))
	b := new(big.Rat).Mul(u, new(big.Rat).SetInt64(total))
	return new(big.Int).Quo(b.Num(), b.Denom()).Int64() // util ≤ 1, so ≤ total
}

// largestBuffers is the plan's n largest present buffers, largest first
// (ties in BufferID order).
func largestBuffers(plan *Plan, n int) []Buffer {
	var bs []Buffer
	for _, b := range plan.Buffers {
		if b.Present() {
			bs = append(bs, b)
		}
	}
	slices.SortStableFunc(bs, func(a, b Buffer) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return bs[:min(n, len(bs))]
}

// fitNotes explains what the fit counted and left out.
func fitNotes(r *FitReport, cfg *ModelConfig) []string {
	var notes []string
	if r.UsedByOthersBytes > 0 {
		notes = append(notes, fmt.Sprintf("%d B of the device are already in use by others and count against the budget of %d B",
			r.UsedByOthersBytes, r.BudgetBytes))
	}
	if r.KVBytesPerBlock == 0 {
		notes = append(notes, "the model has no KV-cache layers: no KV blocks")
	}
	if n := cfg.Counts.SlidingAttention; n > 0 {
		notes = append(notes, fmt.Sprintf("%d sliding-window layers (window %d tokens) are not counted in KV bytes per block", n, cfg.SlidingWindow))
	}
	if n := cfg.Counts.GDN + cfg.Counts.Mamba2; n > 0 {
		notes = append(notes, fmt.Sprintf("the per-sequence recurrent state of %d GDN/Mamba-2 layers is not counted", n))
	}
	if !r.Fits {
		notes = append(notes, fmt.Sprintf("does not fit: short by %d B", r.ShortfallBytes))
	}
	return notes
}

// LogValue logs the report as a group of its byte counts.
func (r *FitReport) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Bool("fits", r.Fits),
		slog.Int64("budget_bytes", r.BudgetBytes),
		slog.Int64("used_by_others_bytes", r.UsedByOthersBytes),
		slog.Int64("arena_bytes", r.ArenaBytes),
		slog.Int64("slab_bytes", r.SlabBytes),
		slog.Int64("kv_blocks", r.KVBlocks),
		slog.Int64("kv_bytes_per_block", r.KVBytesPerBlock),
		slog.Int64("required_bytes", r.RequiredBytes),
		slog.Int64("headroom_bytes", r.HeadroomBytes),
		slog.Int64("shortfall_bytes", r.ShortfallBytes),
	)
}
