package arena

import (
	"fmt"
	"slices"
)

// rankShare is what one rank holds of a model besides what its rank
// config's sizes say: its layers, its place in the pipeline and its
// routed experts.
type rankShare struct {
	idx RankIndex
	// start and end are the decoder layers [start, end) of its stage.
	start, end int64
	// first and last: the stage is the pipeline's first (embed_tokens) or
	// last (final norm, lm_head, logits).
	first, last bool
	// experts is the routed experts it holds per MoE layer; expertSplit
	// the ranks each expert's width is split over (t·d without expert
	// parallelism, else 1).
	experts, expertSplit int64
	// kvHeads is the KV heads it caches per GQA layer (0 for MLA).
	kvHeads int64
}

// splitError is the *ParallelError for option of size not splitting field
// of count, with vLLM's rule.
func splitError(option string, size int64, field string, count int64, rule string) *ParallelError {
	return &ParallelError{Option: option, Size: size, Field: field, Count: count, Reason: rule}
}

// divisors is the sizes in [1, limit] that divide n, for an error's "use".
func divisors(n, limit int64) string {
	var ds []int64
	for d := int64(1); d <= limit && d <= n; d++ {
		if n%d == 0 {
			ds = append(ds, d)
		}
	}
	return fmt.Sprint(ds)
}

// checkTensorSplit checks that tensor-parallel size t splits cfg as vLLM
// requires. Errors: a *ParallelError naming the size, the field and both
// numbers:
//   - num_attention_heads % t (vllm/config/model.py
//     ModelConfig.verify_with_parallel_config);
//   - GQA num_key_value_heads % t or t % num_key_value_heads
//     (vllm/model_executor/layers/linear.py QKVParallelLinear: KV heads
//     split, or replicated t / Hkv times when t > Hkv);
//   - intermediate_size and the shared experts' width % t (vLLM
//     MergedColumnParallelLinear divides them);
//   - GDN num_k_heads and num_v_heads % t (vllm/model_executor/models/
//     qwen3_next.py Qwen3NextGatedDeltaNet);
//   - Mamba-2 num_heads % t and n_groups % t unless n_groups is 1
//     (vllm/model_executor/layers/mamba/mamba_mixer2.py MambaMixer2);
//   - the vocabulary padded to 64 % t (VocabParallelEmbedding);
//   - DeepSeek-V4 with t > 1: its split is not modelled.
func checkTensorSplit(cfg *ModelConfig, t int64) error {
	if t == 1 {
		return nil
	}
	const opt = "tensor_parallel_size"
	if cfg.DeepSeekV4 != nil {
		return &ParallelError{Option: opt, Size: t, Reason: fmt.Sprintf("the split of model_type %q over tensor-parallel ranks "+
			"(grouped O-projection, compressors, indexer) is not modelled; use pipeline_parallel_size, or data_parallel_size with enable_expert_parallel", clip(cfg.ModelType))}
	}
	if h := cfg.NumAttentionHeads; h%t != 0 {
		return splitError(opt, t, "num_attention_heads", h, "vLLM requires the attention heads to divide evenly over the ranks; t in "+divisors(h, MaxParallelSize)+" would")
	}
	if kv := cfg.NumKVHeads; cfg.MLA == nil && kv%t != 0 && t%kv != 0 {
		return splitError(opt, t, "num_key_value_heads", kv, fmt.Sprintf("vLLM requires t to divide the KV heads (%s) or be a multiple of them", divisors(kv, MaxParallelSize)))
	}
	if i := cfg.IntermediateSize; cfg.Counts.DenseMLP > 0 && i%t != 0 {
		return splitError(opt, t, "intermediate_size", i, "the dense MLP's gate/up/down split evenly over the ranks in vLLM")
	}
	if s := cfg.SharedExpertIntermediateSize; s > 0 && cfg.Counts.MoE > 0 && s%t != 0 {
		return splitError(opt, t, "shared_expert_intermediate_size", s, "the shared experts split evenly over the ranks in vLLM")
	}
	if g := cfg.GDN; g != nil && cfg.Counts.GDN > 0 {
		if g.NumKeyHeads%t != 0 {
			return splitError(opt, t, "linear_num_key_heads", g.NumKeyHeads, "vLLM's Gated DeltaNet splits its key heads evenly over the ranks")
		}
		if g.NumValueHeads%t != 0 {
			return splitError(opt, t, "linear_num_value_heads", g.NumValueHeads, "vLLM's Gated DeltaNet splits its value heads evenly over the ranks")
		}
	}
	if m := cfg.Mamba; m != nil && cfg.Counts.Mamba2 > 0 {
		if m.NumHeads%t != 0 {
			return splitError(opt, t, "mamba_num_heads", m.NumHeads, "vLLM's MambaMixer2 splits its heads evenly over the ranks")
		}
		if m.NumGroups%t != 0 && m.NumGroups != 1 {
			return splitError(opt, t, "n_groups", m.NumGroups, "vLLM's MambaMixer2 splits the groups evenly over the ranks, or replicates a single group")
		}
	}
	if v := ceilDiv(cfg.VocabSize, vocabPadding) * vocabPadding; v%t != 0 {
		return splitError(opt, t, "vocab_size padded to 64", v, "vLLM's VocabParallelEmbedding splits the padded vocabulary evenly over the ranks")
	}
	return nil
}

// rankConfig is cfg as rank idx of the resolved layout l holds it: its
// stage's layers, and every size tensor parallelism splits divided by t,
// so that PlanFor, EstimateWeights and NewKVLayoutFor on it size that
// rank's buffers, weights and KV cache. With t = p = 1 and expert
// parallelism off it is an equal copy of cfg. The split, from vLLM's
// layers:
//   - attention: num_attention_heads / t (q, o, MLA's q_b and kv_b:
//     ColumnParallelLinear and RowParallelLinear); GQA KV heads max(1,
//     Hkv / t) (QKVParallelLinear replicates them when t > Hkv); MLA's
//     kv_a_proj_with_mqa, its latent KV cache (kv_lora_rank +
//     qk_rope_head_dim per token and layer) and every norm replicated
//     (vllm/model_executor/models/deepseek_v2.py DeepseekV2MLAAttention);
//   - dense MLP and shared experts: intermediate widths / t;
//   - routed experts: with expert parallelism whole experts (rankShare),
//     else every expert's width / (t·d) (vLLM FusedMoE flattens TP across
//     DP); the router [H, E] replicated;
//   - GDN key and value heads / t; Mamba-2 heads and d_inner / t, n_groups
//     / t or, for one group, replicated;
//   - vocabulary padded to a multiple of 64, / t (embed_tokens, lm_head,
//     the logits shard), only when t > 1.
//
// Errors: checkTensorSplit's; a *ParallelError when the stage has no
// layer (p > num_hidden_layers).
func rankConfig(cfg *ModelConfig, l ParallelLayout, idx RankIndex) (*ModelConfig, rankShare, error) {
	t, p, d := l.TensorParallelSize, l.PipelineParallelSize, l.DataParallelSize
	sh := rankShare{idx: idx, first: idx.PP == 0, last: idx.PP == p-1, experts: cfg.NumExperts, expertSplit: 1}
	if err := checkTensorSplit(cfg, t); err != nil {
		return nil, sh, err
	}
	n := int64(len(cfg.Layers))
	if p > n {
		return nil, sh, splitError("pipeline_parallel_size", p, "num_hidden_layers", n, "every pipeline stage needs at least one layer")
	}
	sh.start, sh.end = ppLayers(n, idx.PP, p)
	rc := *cfg
	rc.Layers = slices.Clone(cfg.Layers[sh.start:sh.end])
	rc.Counts = countLayers(rc.Layers)
	rc.Notes = slices.Clone(cfg.Notes)
	if p > 1 {
		rc.NumLayers = sh.end - sh.start
	}
	if !sh.last {
		rc.NumNextNPredictLayers = 0
	}
	if cfg.NumExperts > 0 {
		if l.EnableExpertParallel {
			sh.experts = localExperts(cfg.NumExperts, idx.EP, t*d)
		} else {
			sh.expertSplit = t * d
			rc.MoEIntermediateSize = ceilDiv(cfg.MoEIntermediateSize, t*d)
		}
	}
	if cfg.MLA == nil {
		sh.kvHeads = max(1, cfg.NumKVHeads/t)
	}
	if t == 1 {
		return &rc, sh, nil
	}
	rc.NumAttentionHeads /= t
	if cfg.MLA == nil {
		rc.NumKVHeads = sh.kvHeads
	}
	rc.IntermediateSize = ceilDiv(cfg.IntermediateSize, t) // checked to divide when a layer has a dense MLP
	rc.SharedExpertIntermediateSize /= t
	rc.VocabSize = ceilDiv(cfg.VocabSize, vocabPadding) * vocabPadding / t
	if g := cfg.GDN; g != nil {
		gg := *g
		gg.NumKeyHeads, gg.NumValueHeads = g.NumKeyHeads/t, g.NumValueHeads/t
		rc.GDN = &gg
	}
	if m := cfg.Mamba; m != nil {
		mm := *m
		mm.NumHeads, mm.DInner = m.NumHeads/t, m.DInner/t
		mm.NumGroups = max(m.NumGroups/t, 1)
		rc.Mamba = &mm
	}
	return &rc, sh, nil
}
