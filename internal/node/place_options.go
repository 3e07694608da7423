package node

import (
	"fmt"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// weightDTypes are the weight_dtype strings of a PlaceRequest and the
// arena.WeightOptions.DType each stands for ("" keeps the config's).
var weightDTypes = map[string]arena.DType{"": 0, "bf16": arena.BF16, "f32": arena.F32, "fp8": arena.FP8}

// PlaceRequestFor is the PlaceRequest that carries configJSON (a Hugging
// Face config.json) and every serving and budget option of opts and fo
// (those of "arenactl fit"), field by field, with po's sizes; placeArgs
// on the node gives them back equal. Errors (gpuarena.ErrInvalidValue):
// a weights dtype other than 0, BF16, F32 or FP8, and checkpoint sizes
// (fo.CheckpointWeightBytes, fo.CheckpointPooledTensorBytes), which
// describe one GPU's checkpoint and are not sized per rank.
func PlaceRequestFor(configJSON []byte, opts arena.Options, fo arena.FitOptions, po PlaceOptions) (*nodepb.PlaceRequest, error) {
	if fo.CheckpointWeightBytes != nil || fo.CheckpointPooledTensorBytes != nil {
		return nil, fmt.Errorf("place: %w: checkpoint sizes are one GPU's; a placement sizes the weights of every rank by estimate", gpuarena.ErrInvalidValue)
	}
	wd := ""
	for name, d := range weightDTypes {
		if d == fo.Weights.DType {
			wd = name
		}
	}
	if wd == "" && fo.Weights.DType != 0 {
		return nil, fmt.Errorf("place: weight dtype %s: %w: want bf16, f32 or fp8", fo.Weights.DType, gpuarena.ErrInvalidValue)
	}
	r := &nodepb.PlaceRequest{
		ConfigJson:           configJSON,
		MaxBatchTokens:       opts.MaxBatchTokens,
		MaxSeqLen:            opts.MaxSeqLen,
		KvBlockSize:          opts.KVBlockSize,
		MaxBatchSize:         opts.MaxBatchSize,
		KMax:                 opts.KMax,
		LoraMaxRank:          opts.LoRAMaxRank,
		Fp8Rowwise:           opts.FP8Rowwise,
		Q2Prefill:            opts.Q2Prefill,
		LogitsRows:           string(opts.LogitsRows),
		KvCacheDtype:         string(opts.KVCacheDType),
		MambaSsmCacheDtype:   string(opts.MambaSSMCacheDType),
		AllowLongMaxSeqLen:   opts.AllowLongMaxSeqLen,
		ReserveBytes:         fo.ReserveBytes,
		UtilizationScope:     string(fo.UtilizationScope),
		SamplerWarmup:        string(fo.SamplerWarmup),
		CudaGraphs:           string(fo.CUDAGraphs),
		WeightDtype:          wd,
		IncludeMtp:           fo.Weights.IncludeMTP,
		ExcludeWeights:       fo.ExcludeWeights,
		CheckpointLayout:     fo.Weights.CheckpointLayout,
		TensorParallelSize:   po.TensorParallelSize,
		PipelineParallelSize: po.PipelineParallelSize,
	}
	if fo.GPUMemoryUtilization != nil {
		r.GpuMemoryUtilization = *fo.GPUMemoryUtilization
	}
	if fo.Weights.MXFP4Backend != 0 {
		r.Mxfp4Backend = fo.Weights.MXFP4Backend.String()
	}
	return r, nil
}

// placeArgs reads a PlaceRequest back into the model's config and the
// options PlaceRequestFor carried, checking each the way arena does
// (arena.Options.Resolve on the config; the budget options' parsers).
// Errors wrap gpuarena.ErrInvalidValue and arena's own error (an
// *arena.OptionError names the option).
func placeArgs(m *nodepb.PlaceRequest) (*arena.ModelConfig, arena.Options, arena.FitOptions, PlaceOptions, error) {
	var (
		opts arena.Options
		fo   arena.FitOptions
		po   = PlaceOptions{TensorParallelSize: m.GetTensorParallelSize(), PipelineParallelSize: m.GetPipelineParallelSize()}
	)
	bad := func(err error) (*arena.ModelConfig, arena.Options, arena.FitOptions, PlaceOptions, error) {
		return nil, opts, fo, po, fmt.Errorf("place: %w: %w", gpuarena.ErrInvalidValue, err)
	}
	cfg, err := arena.ParseConfig(m.GetConfigJson())
	if err != nil {
		return bad(err)
	}
	opts = arena.Options{
		MaxBatchTokens:     m.GetMaxBatchTokens(),
		MaxSeqLen:          m.GetMaxSeqLen(),
		KVBlockSize:        m.GetKvBlockSize(),
		MaxBatchSize:       m.GetMaxBatchSize(),
		LoRAMaxRank:        m.GetLoraMaxRank(),
		FP8Rowwise:         m.GetFp8Rowwise(),
		Q2Prefill:          m.GetQ2Prefill(),
		LogitsRows:         arena.LogitsRows(m.GetLogitsRows()),
		KVCacheDType:       arena.KVCacheDType(m.GetKvCacheDtype()),
		MambaSSMCacheDType: arena.SSMCacheDType(m.GetMambaSsmCacheDtype()),
		AllowLongMaxSeqLen: m.GetAllowLongMaxSeqLen(),
	}
	if m.KMax != nil {
		opts.KMax = new(m.GetKMax())
	}
	if _, err := opts.Resolve(cfg); err != nil {
		return bad(err)
	}
	fo = arena.FitOptions{
		UtilizationScope: arena.UtilizationScope(m.GetUtilizationScope()),
		SamplerWarmup:    arena.SamplerWarmup(m.GetSamplerWarmup()),
		CUDAGraphs:       arena.CUDAGraphs(m.GetCudaGraphs()),
		ExcludeWeights:   m.GetExcludeWeights(),
		Weights:          arena.WeightOptions{IncludeMTP: m.GetIncludeMtp(), CheckpointLayout: m.GetCheckpointLayout()},
	}
	if u := m.GetGpuMemoryUtilization(); u != 0 {
		if err := arena.ValidateGPUMemoryUtilization(u); err != nil {
			return bad(err)
		}
		fo.GPUMemoryUtilization = &u
	}
	if m.ReserveBytes != nil {
		if m.GetReserveBytes() < 0 {
			return bad(&arena.OptionError{Option: "reserve_bytes", Value: m.GetReserveBytes(), Reason: "must not be negative"})
		}
		fo.ReserveBytes = new(m.GetReserveBytes())
	}
	if _, err := arena.ParseUtilizationScope(m.GetUtilizationScope()); err != nil {
		return bad(err)
	}
	if _, err := arena.ParseSamplerWarmup(m.GetSamplerWarmup()); err != nil {
		return bad(err)
	}
	if _, err := arena.ParseCUDAGraphs(m.GetCudaGraphs()); err != nil {
		return bad(err)
	}
	if b := m.GetMxfp4Backend(); b != "" {
		if err := fo.Weights.MXFP4Backend.UnmarshalText([]byte(b)); err != nil {
			return bad(err)
		}
	}
	d, ok := weightDTypes[m.GetWeightDtype()]
	if !ok {
		return bad(fmt.Errorf("weight_dtype %q: want \"\", bf16, f32 or fp8", m.GetWeightDtype()))
	}
	fo.Weights.DType = d
	return cfg, opts, fo, po, nil
}
