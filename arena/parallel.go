package arena

import (
	"errors"
	"fmt"
)

// MaxParallelSize bounds each of tensor_parallel_size,
// pipeline_parallel_size and data_parallel_size, and their product (the
// GPUs of a layout): PlanRanks sizes every rank, so the bound keeps a
// layout's work small. 1024 GPUs is past any one vLLM deployment's model
// replica.
const MaxParallelSize = 1024

// ErrParallelLayout is the sentinel every layout the model cannot be split
// by wraps: heads, KV heads, layers, vocabulary or state that the parallel
// sizes do not divide as vLLM requires, or a family whose split is not
// modelled. Test with errors.Is; the detail is a *ParallelError.
var ErrParallelLayout = errors.New("arena: model cannot be split by this parallel layout")

// ParallelError is a parallel layout the model cannot take: Option is the
// layout's option ("tensor_parallel_size"), Size its value, Field the
// config field it must divide ("num_attention_heads") and Count that
// field's value; Reason says what vLLM requires and what would work.
// It unwraps to ErrParallelLayout.
type ParallelError struct {
	Option string
	Size   int64
	Field  string
	Count  int64
	Reason string
}

// Error is "arena: tensor_parallel_size 3 does not split num_attention_heads
// 32: reason".
func (e *ParallelError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("arena: %s %d: %s", e.Option, e.Size, e.Reason)
	}
	return fmt.Sprintf("arena: %s %d does not split %s %d: %s", e.Option, e.Size, e.Field, e.Count, e.Reason)
}

// Unwrap returns ErrParallelLayout.
func (e *ParallelError) Unwrap() error { return ErrParallelLayout }

// ParallelLayout is how one model replica set is spread over GPUs, in
// vLLM's terms (vllm/config/parallel.py ParallelConfig): the zero value and
// every size 0 or 1 is one GPU. GPUs is TensorParallelSize ×
// PipelineParallelSize × DataParallelSize.
type ParallelLayout struct {
	// TensorParallelSize (tensor_parallel_size, t) splits attention heads,
	// MLP widths, vocabulary and recurrent heads over t ranks.
	TensorParallelSize int64 `json:"tensor_parallel_size"`
	// PipelineParallelSize (pipeline_parallel_size, p) splits the decoder
	// layers over p stages (vllm/distributed/utils.py get_pp_indices).
	PipelineParallelSize int64 `json:"pipeline_parallel_size"`
	// DataParallelSize (data_parallel_size, d) runs d replicas of the
	// t·p ranks, each with its own requests and KV cache. With
	// EnableExpertParallel on an MoE model it is vLLM's data-parallel
	// attention: attention and dense layers replicated per DP rank, the
	// routed experts spread over all t·d ranks of a stage.
	DataParallelSize int64 `json:"data_parallel_size"`
	// EnableExpertParallel (enable_expert_parallel) places whole routed
	// experts on ranks, E / (t·d) each (the remainder on the first ranks),
	// instead of splitting every expert's width over t·d ranks.
	EnableExpertParallel bool `json:"enable_expert_parallel"`
}

// resolved is l with every unset size (≤ 0 is an error; 0 means 1) filled.
// Errors: an *OptionError for a negative size or one past MaxParallelSize,
// or a product of the three past it.
func (l ParallelLayout) resolved() (ParallelLayout, error) {
	sizes := []struct {
		name string
		v    *int64
	}{
		{"tensor_parallel_size", &l.TensorParallelSize},
		{"pipeline_parallel_size", &l.PipelineParallelSize},
		{"data_parallel_size", &l.DataParallelSize},
	}
	for _, s := range sizes {
		if *s.v == 0 {
			*s.v = 1
		}
		if *s.v < 1 || *s.v > MaxParallelSize {
			return l, &OptionError{Option: s.name, Value: *s.v, Reason: fmt.Sprintf("must be in [1, %d] (0: 1)", MaxParallelSize)}
		}
	}
	if g := l.TensorParallelSize * l.PipelineParallelSize * l.DataParallelSize; g > MaxParallelSize {
		return l, &OptionError{Option: "data_parallel_size", Value: l.DataParallelSize,
			Reason: fmt.Sprintf("tensor × pipeline × data parallel sizes = %d GPUs, more than %d", g, MaxParallelSize)}
	}
	return l, nil
}

// GPUs is t·p·d, the GPUs (ranks) of the layout, each size below 1 taken as 1.
func (l ParallelLayout) GPUs() int64 {
	return max(l.TensorParallelSize, 1) * max(l.PipelineParallelSize, 1) * max(l.DataParallelSize, 1)
}

// String is "t=8 p=1 d=1" with " ep" when expert parallelism is on.
func (l ParallelLayout) String() string {
	s := fmt.Sprintf("t=%d p=%d d=%d", max(l.TensorParallelSize, 1), max(l.PipelineParallelSize, 1), max(l.DataParallelSize, 1))
	if l.EnableExpertParallel {
		s += " ep"
	}
	return s
}

// RankIndex is where one rank sits in a layout. Global ranks are ordered
// as vLLM orders them (vllm/distributed/parallel_state.py
// initialize_model_parallel: ranks laid out as [DP, PP, TP], TP fastest):
// Rank = DP·(p·t) + PP·t + TP.
type RankIndex struct {
	Rank int64 `json:"rank"`
	TP   int64 `json:"tp_rank"`
	PP   int64 `json:"pp_rank"`
	DP   int64 `json:"dp_rank"`
	// EP is the rank's place among the t·d ranks of its stage that share
	// the routed experts: DP·t + TP (vLLM's EP group is DP × TP).
	EP int64 `json:"ep_rank"`
}

// rankIndex is global rank g of the resolved layout l.
func (l ParallelLayout) rankIndex(g int64) RankIndex {
	t, p := l.TensorParallelSize, l.PipelineParallelSize
	r := RankIndex{Rank: g, TP: g % t, PP: (g / t) % p, DP: g / (t * p)}
	r.EP = r.DP*t + r.TP
	return r
}

// ppLayers is the decoder layers [start, end) pipeline stage rank of size
// stages holds, of n layers: ⌊n/p⌋ each and the n mod p remainder layers
// one each on the stages before the last, counting back from the
// second-to-last (vllm/distributed/utils.py get_pp_indices, without
// VLLM_PP_LAYER_PARTITION): the last stage, which also runs the final norm
// and lm_head, never takes one.
func ppLayers(n, rank, stages int64) (start, end int64) {
	parts := make([]int64, stages)
	for i := range parts {
		parts[i] = n / stages
	}
	for i := int64(2); i < n%stages+2; i++ {
		parts[stages-i]++
	}
	for i := range rank {
		start += parts[i]
	}
	return start, start + parts[rank]
}

// localExperts is how many of e routed experts EP rank r of size ranks
// holds: ⌊e/size⌋, one more on the first e mod size ranks
// (vllm/model_executor/layers/fused_moe/layer.py determine_expert_map).
func localExperts(e, r, size int64) int64 {
	n := e / size
	if r < e%size {
		n++
	}
	return n
}

// vocabPadding is the multiple vLLM pads the vocabulary to before it
// splits embed_tokens and lm_head over the tensor-parallel ranks
// (vllm/model_executor/layers/vocab_parallel_embedding.py
// DEFAULT_VOCAB_PADDING_SIZE).
const vocabPadding = 64
