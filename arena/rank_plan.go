package arena

import (
	"fmt"
	"strings"
)

// RankPlan is one rank's share of a model under a ParallelLayout: the
// config as that rank holds it, its arena plan, its weights and its KV
// layout, each sized for that rank alone.
type RankPlan struct {
	RankIndex
	// FirstLayer and EndLayer are the decoder layers [FirstLayer,
	// EndLayer) of the rank's pipeline stage (vLLM get_pp_indices).
	FirstLayer int64 `json:"first_layer"`
	EndLayer   int64 `json:"end_layer"`
	// FirstStage and LastStage: the stage holds embed_tokens (and a
	// multimodal model's vision tower), or the final norm, lm_head and
	// logits; with tie_word_embeddings and p > 1 the last stage holds its
	// own copy of embed_tokens as lm_head (vLLM's LlamaForCausalLM ties
	// lm_head to an embed_tokens built on the last rank).
	FirstStage bool `json:"first_stage"`
	LastStage  bool `json:"last_stage"`
	// AttentionHeads is the query heads per attention layer; KVHeads the
	// KV heads it caches per GQA layer, max(1, num_key_value_heads / t)
	// (0 for MLA, whose latent is replicated on every rank).
	AttentionHeads int64 `json:"attention_heads"`
	KVHeads        int64 `json:"kv_heads"`
	// Experts is the routed experts it holds per MoE layer, ExpertWidth
	// each one's intermediate width on this rank (moe_intermediate_size /
	// (t·d) without expert parallelism).
	Experts     int64 `json:"experts"`
	ExpertWidth int64 `json:"expert_width"`
	// VocabShard is the vocabulary rows of its embed_tokens and lm_head
	// shard: vocab_size padded to 64 and / t when t > 1.
	VocabShard int64 `json:"vocab_shard"`
	// Config is cfg as this rank holds it (its layers, sizes / t); PlanFor,
	// EstimateWeights and NewKVLayoutFor on it size the rank, except what
	// Plan, Weights and KV correct (logits, pipeline ends, experts).
	Config *ModelConfig `json:"-"`
	// Plan is the rank's arena: PlanFor(Config, opts), with the logits
	// absent on a stage before the last and, on TP rank 0 of the last
	// stage with t > 1, [rows, padded vocab]: the logits of every rank
	// gathered there (vllm/model_executor/layers/logits_processor.py
	// LogitsProcessor._gather_logits, tensor_model_parallel_gather to
	// rank 0). Other ranks hold their [rows, padded vocab / t] shard.
	Plan *Plan `json:"-"`
	// Weights is the rank's weights, tensor by tensor (see PlanRanks).
	Weights *WeightReport `json:"-"`
	// KV is the rank's KV layout: NewKVLayoutFor(Config, opts).
	KV KVLayout `json:"kv"`
}

// PlanRanks sizes every rank of layout for cfg under the serving options
// opts and weight options wopts: one RankPlan per GPU, in global rank
// order (RankIndex). Each rank's sizes follow vLLM's split (rankConfig):
// heads, widths, recurrent heads and vocabulary / t; layers by
// get_pp_indices, embed_tokens on the first stage and the final norm,
// lm_head and logits on the last; routed experts by determine_expert_map
// with expert parallelism (E / (t·d), the remainder on the first EP
// ranks), else every expert's width / (t·d); data-parallel ranks repeat
// the t·p ranks of replica 0, each with its own KV cache. The zero layout
// is one GPU: its one RankPlan's Plan, Weights and KV equal PlanFor(cfg,
// opts), EstimateWeights(cfg, wopts) and NewKVLayoutFor(cfg, opts).
// Errors: an *OptionError for a layout size outside [1, MaxParallelSize]
// (0 means 1); a *ParallelError (errors.Is ErrParallelLayout) for sizes
// the model does not divide as vLLM requires, naming both numbers; and
// those of PlanFor, EstimateWeights and NewKVLayoutFor.
func PlanRanks(cfg *ModelConfig, opts Options, wopts WeightOptions, layout ParallelLayout) ([]RankPlan, error) {
	if err := cfg.checkSizes(); err != nil {
		return nil, err
	}
	l, err := layout.resolved()
	if err != nil {
		return nil, err
	}
	ranks := make([]RankPlan, l.GPUs())
	for g := range ranks {
		if ranks[g], err = planRank(cfg, opts, wopts, l, l.rankIndex(int64(g))); err != nil {
			return nil, err
		}
	}
	return ranks, nil
}

// planRank is PlanRanks for the one rank idx of the resolved layout l.
func planRank(cfg *ModelConfig, opts Options, wopts WeightOptions, l ParallelLayout, idx RankIndex) (RankPlan, error) {
	rc, sh, err := rankConfig(cfg, l, idx)
	if err != nil {
		return RankPlan{}, err
	}
	plan, err := PlanFor(rc, opts)
	if err != nil {
		return RankPlan{}, err
	}
	if err := rankLogits(plan, cfg, l, sh); err != nil {
		return RankPlan{}, err
	}
	weights, err := EstimateWeights(rc, wopts)
	if err != nil {
		return RankPlan{}, err
	}
	if l.GPUs() > 1 {
		if err := rankWeights(weights, cfg, l, sh); err != nil {
			return RankPlan{}, err
		}
	}
	kv, err := NewKVLayoutFor(rc, opts)
	if err != nil {
		return RankPlan{}, err
	}
	return RankPlan{
		RankIndex: idx, FirstLayer: sh.start, EndLayer: sh.end, FirstStage: sh.first, LastStage: sh.last,
		AttentionHeads: rc.NumAttentionHeads, KVHeads: sh.kvHeads, Experts: sh.experts, ExpertWidth: rc.MoEIntermediateSize,
		VocabShard: rc.VocabSize, Config: rc, Plan: plan, Weights: weights, KV: kv,
	}, nil
}

// rankLogits corrects plan's logits buffer for the rank sh of layout l:
// absent on a stage before the last (lm_head runs on the last stage);
// on TP rank 0 of the last stage with t > 1, [rows, padded vocab], the
// gathered logits (RankPlan.Plan). Errors: an *OverflowError.
func rankLogits(plan *Plan, cfg *ModelConfig, l ParallelLayout, sh rankShare) error {
	b := plan.Buffers[Logits]
	switch {
	case !sh.last:
		b = Buffer{ID: Logits, Absent: fmt.Sprintf("pipeline stage %d of %d: lm_head and the logits are on the last stage", sh.idx.PP, l.PipelineParallelSize)}
		plan.Notes = append(plan.Notes, "logits: "+b.Absent)
	case l.TensorParallelSize > 1 && sh.idx.TP == 0 && b.Absent == "":
		rows := b.Shape[0]
		v := ceilDiv(cfg.VocabSize, vocabPadding) * vocabPadding
		n, err := CheckedProduct(Logits.String(), rows, v, b.DType.Size())
		if err != nil {
			return err
		}
		b.Shape, b.Bytes = []int64{rows, v}, n
		plan.Notes = append(plan.Notes, fmt.Sprintf("logits: [%d, %d], the %d tensor-parallel ranks' shards gathered on rank 0", rows, v, l.TensorParallelSize))
	default:
		return nil
	}
	plan.Buffers[Logits] = b
	return plan.retotal()
}

// retotal recomputes BufferBytes and TotalBytes from Buffers and SlabBytes.
// Errors: an *OverflowError.
func (p *Plan) retotal() error {
	s := sizer{what: "plan total"}
	var sum int64
	for _, b := range p.Buffers {
		sum = s.add(sum, b.Bytes)
	}
	p.BufferBytes = sum
	p.TotalBytes = s.add(sum, p.SlabBytes)
	return s.err
}

// singleDeviceNote is EstimateWeights's note that the weights are sized
// for one device; PlanRanks replaces it with the rank's.
const singleDeviceNote = "sized for one device holding every weight: PlanRanks and FitRanks (arenactl fit --tensor-parallel-size, arenactl place) size each rank of several GPUs"

// rankWeights turns the weights EstimateWeights gave for the rank's config
// into the rank's: embed_tokens (and a vision tower) only on the first
// stage, or also on the last with tie_word_embeddings; the final norm and
// lm_head only on the last; with expert parallelism sh.experts of the E
// routed experts per MoE layer. Errors: an *OverflowError.
func rankWeights(r *WeightReport, cfg *ModelConfig, l ParallelLayout, sh rankShare) error {
	kept := r.Tensors[:0]
	for _, t := range r.Tensors {
		switch {
		case t.Name == "embed_tokens" && !sh.first && !(cfg.TieWordEmbeddings && sh.last):
			continue
		case (t.Group == "vision_tower" || t.Group == "multimodal_projector") && !sh.first:
			continue
		case (t.Name == "norm" || t.Name == "lm_head") && !sh.last:
			continue
		case t.Group == "moe_experts" && l.EnableExpertParallel && cfg.NumExperts > 0:
			t = scaleCount(t, t.Count/cfg.NumExperts*sh.experts)
		}
		kept = append(kept, t)
	}
	r.Tensors = kept
	notes := r.Notes[:0]
	for _, n := range r.Notes {
		if n != singleDeviceNote {
			notes = append(notes, n)
		}
	}
	r.Notes = append(notes, rankWeightNote(cfg, l, sh))
	r.Groups, r.EmbeddingParams, r.CheckpointBytes = nil, 0, 0
	return r.sum()
}

// scaleCount is t with n instances instead of t.Count, its params and
// bytes scaled alike (every instance is the same size) and ActiveCount
// capped at n.
func scaleCount(t WeightTensor, n int64) WeightTensor {
	if t.Count == 0 {
		return t
	}
	per, perParams := t.Bytes/t.Count, t.Params/t.Count
	perCk := t.CheckpointBytes / t.Count
	t.Count, t.ActiveCount = n, min(t.ActiveCount, n)
	t.Params, t.ActiveParams = n*perParams, t.ActiveCount*perParams
	t.Bytes, t.CheckpointBytes = n*per, n*perCk
	return t
}

// rankWeightNote says what share of the weights rank sh holds.
func rankWeightNote(cfg *ModelConfig, l ParallelLayout, sh rankShare) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d (tp %d, pp %d, dp %d) of %s: layers [%d, %d)", sh.idx.Rank, sh.idx.TP, sh.idx.PP, sh.idx.DP, l, sh.start, sh.end)
	if l.TensorParallelSize > 1 {
		fmt.Fprintf(&b, "; heads, MLP widths and the padded vocabulary / %d, norms and routers replicated", l.TensorParallelSize)
	}
	if cfg.NumExperts > 0 {
		if l.EnableExpertParallel {
			fmt.Fprintf(&b, "; %d of %d routed experts (EP rank %d of %d)", sh.experts, cfg.NumExperts, sh.idx.EP, l.TensorParallelSize*l.DataParallelSize)
		} else if sh.expertSplit > 1 {
			fmt.Fprintf(&b, "; every routed expert's width / %d", sh.expertSplit)
		}
	}
	if cfg.Vision != nil && l.TensorParallelSize > 1 && sh.first {
		b.WriteString("; the vision tower is counted whole (an over-estimate: vLLM splits most vision towers too)")
	}
	return b.String()
}
