package arena

// qwen2: Qwen2 (modeling_qwen2.py Qwen2Attention): Llama with q/k/v biases.
type qwen2 struct{ decoder }

// qwen2MoE: Qwen2-MoE (modeling_qwen2_moe.py): qwen2's attention, routed
// experts (num_experts, decoder_sparse_step, mlp_only_layers) and a shared
// expert of shared_expert_intermediate_size gated by shared_expert_gate.
type qwen2MoE struct{ decoder }

func init() {
	registerFamily(qwen2{}, "qwen2")
	registerFamily(qwen2MoE{decoder{ffn: ffnStyle{sharedExpertGate: true}}}, "qwen2_moe")
}

// parse reads a standard dense decoder with attention biases
// (qwenSlidingWindow).
func (qwen2) parse(r *fieldReader, c *ModelConfig) {
	c.AttentionBias = true
	qwenSlidingWindow(r, c)
	parseDense(r, c)
}

// parse reads a standard MoE decoder (num_experts) with attention biases
// (qwenSlidingWindow).
func (qwen2MoE) parse(r *fieldReader, c *ModelConfig) {
	c.AttentionBias = true
	qwenSlidingWindow(r, c)
	parseMoE(r, c, "num_experts", nil)
}

// qwenSlidingWindow drops sliding_window when use_sliding_window is false
// or absent, as Qwen2Config and Qwen2MoeConfig do (configuration_qwen2.py:
// sliding_window is None unless use_sliding_window), with a note: Qwen2
// checkpoints state a window (32768) they do not use.
func qwenSlidingWindow(r *fieldReader, c *ModelConfig) {
	if r.has("sliding_window") && !r.bool("use_sliding_window") && r.err == nil {
		c.Notes = append(c.Notes, r.prefix+"sliding_window is ignored: use_sliding_window is false (Qwen2Config)")
		delete(r.obj, "sliding_window")
	}
}
