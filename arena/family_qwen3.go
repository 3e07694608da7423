package arena

// qwen3: Qwen3 (modeling_qwen3.py Qwen3Attention): Llama with q_norm and
// k_norm [D] on every query and key head.
type qwen3 struct{ decoder }

// qwen3MoE: Qwen3-MoE (modeling_qwen3_moe.py): qwen3's attention and routed
// experts (num_experts, decoder_sparse_step, mlp_only_layers).
type qwen3MoE struct{ decoder }

func init() {
	registerFamily(qwen3{}, "qwen3")
	registerFamily(qwen3MoE{}, "qwen3_moe")
}

// parse reads a standard dense decoder with q/k norms.
func (qwen3) parse(r *fieldReader, c *ModelConfig) {
	c.QKNorm = true
	parseDense(r, c)
}

// parse reads a standard MoE decoder (num_experts) with q/k norms.
func (qwen3MoE) parse(r *fieldReader, c *ModelConfig) {
	c.QKNorm = true
	parseMoE(r, c, "num_experts", nil)
}
