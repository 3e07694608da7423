package node

import (
	"fmt"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// place answers a PlaceRequest from the cluster's inventories as this
// node's gossip holds them (Place). A config or option arena refuses is
// ERROR_CODE_INVALID_ARGUMENT.
func (g *gateway) place(m *nodepb.PlaceRequest) *nodepb.PlaceResponse {
	bad := func(err error) *nodepb.PlaceResponse {
		return &nodepb.PlaceResponse{Error: wireError(fmt.Errorf("place: %w: %w", gpuarena.ErrInvalidValue, err))}
	}
	cfg, err := arena.ParseConfig(m.GetConfigJson())
	if err != nil {
		return bad(err)
	}
	opts := arena.DefaultOptions()
	if v := m.GetMaxBatchTokens(); v != 0 {
		opts.MaxBatchTokens = v
	}
	if v := m.GetMaxSeqLen(); v != 0 {
		opts.MaxSeqLen = v
	}
	var fo arena.FitOptions
	if v := m.GetGpuMemoryUtilization(); v != 0 {
		fo.GPUMemoryUtilization = &v
	}
	switch m.GetWeightDtype() {
	case "":
	case "bf16":
		fo.Weights.DType = arena.BF16
	case "f32":
		fo.Weights.DType = arena.F32
	case "fp8":
		fo.Weights.DType = arena.FP8
	default:
		return bad(fmt.Errorf("weight_dtype %q: want \"\", bf16, f32 or fp8", m.GetWeightDtype()))
	}
	invs, err := g.members.Inventories()
	if err != nil {
		return &nodepb.PlaceResponse{Error: wireError(err)}
	}
	ps, err := Place(cfg, opts, fo, PlaceOptions{TensorParallelSize: m.GetTensorParallelSize(), PipelineParallelSize: m.GetPipelineParallelSize()}, invs)
	if err != nil {
		return bad(err)
	}
	out := &nodepb.PlaceResponse{}
	for _, p := range ps {
		w := &nodepb.Placement{TensorParallelSize: p.Layout.TensorParallelSize, PipelineParallelSize: p.Layout.PipelineParallelSize,
			Gpus: p.Fit.GPUs, KvBlocks: p.Fit.KVBlocks, KvTokens: p.Fit.KVTokens, MaxConcurrentSeqs: p.Fit.MaxConcurrentSeqs}
		for _, s := range p.Stages {
			w.Stages = append(w.Stages, &nodepb.Stage{Address: s.Address, MemberId: s.MemberID, Devices: s.Devices})
		}
		out.Placements = append(out.Placements, w)
	}
	return out
}
