package arena

// glm4MoE: GLM-4.5 and GLM-4.5-Air (modeling_glm4_moe.py). The standard
// decoder: Glm4MoeAttention is GQA with q/k/v biases when attention_bias
// and q_norm, k_norm [D] when use_qk_norm (its partial RoPE changes no
// size); the first first_k_dense_replace layers have a dense SwiGLU MLP of
// intermediate_size (Glm4MoeMLP), the others Glm4MoeMoE: a router [H, E]
// with an F32 e_score_correction_bias [E] (Glm4MoeTopkRouter),
// n_routed_experts SwiGLU experts of moe_intermediate_size of which
// num_experts_per_tok are read per token, and one shared expert MLP of
// n_shared_experts × moe_intermediate_size. The checkpoint's MTP layer
// (num_nextn_predict_layers) is not modelled.
type glm4MoE struct{ decoder }

func init() {
	registerFamily(glm4MoE{decoder{ffn: ffnStyle{scoreCorrectionBias: true}}}, "glm4_moe")
}

// parse reads the standard core and head_dim, attention_bias and
// use_qk_norm (false when absent), the routed experts (n_routed_experts is
// required) and the shared expert; layer i is MoE when i ≥
// first_k_dense_replace. Absent n_shared_experts and first_k_dense_replace
// are 1, Glm4MoeConfig's defaults.
func (glm4MoE) parse(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyMoE
	parseCore(r, c)
	c.AttentionBias = r.bool("attention_bias")
	c.QKNorm = r.bool("use_qk_norm")
	resolveHeadDim(r, c, "head_dim")
	mixers := standardMixers(r, c, nil)
	readExperts(r, c, true, "n_routed_experts")
	sharedExperts(r, c, 1)
	firstDense := r.nonNegative("first_k_dense_replace", 1)
	if r.err != nil {
		return
	}
	ffns := uniform(c.NumLayers, FFNMoE)
	for i := range min(firstDense, c.NumLayers) {
		ffns[i] = FFNDense
	}
	buildLayers(r, c, mixers, ffns)
}
