package arena

// gptOSS: gpt-oss (modeling_gpt_oss.py): the standard decoder with biases on
// q/k/v/o, one attention sink per head, sliding and full attention
// alternating, a router with a bias and fused experts with biases
// (GptOssExperts), num_local_experts of them in every layer.
type gptOSS struct{ decoder }

func init() {
	registerFamily(gptOSS{decoder{ffn: ffnStyle{routerBias: true, fusedExperts: true}}}, "gpt_oss")
}

// parse reads a standard MoE decoder (num_local_experts) with attention
// biases; without layer_types, the layers alternate as gptOSSMixers.
func (gptOSS) parse(r *fieldReader, c *ModelConfig) {
	c.AttentionBias = true
	parseMoE(r, c, "num_local_experts", gptOSSMixers)
}

// gptOSSMixers is GptOssConfig's default layer_types for n layers: layer i
// is "sliding_attention" if (i+1) % 2 else "full_attention".
func gptOSSMixers(n int64) []MixerKind {
	mixers := uniform(n, MixerFullAttention)
	for i := range mixers {
		if (i+1)%2 == 1 {
			mixers[i] = MixerSlidingAttention
		}
	}
	return mixers
}

// layers adds the decoder's tensors plus, per attention layer, o_proj's
// bias [H] and the attention sinks [Hq] (GptOssAttention.sinks).
func (f gptOSS) layers(w *weightBuilder) {
	c, n := w.cfg, w.cfg.Counts
	w.layerNorms("layers.", int64(len(c.Layers)))
	w.gqa("layers.", n.Attention())
	w.t("layers.self_attn.o_proj.bias", "attention", kindVector, n.Attention(), c.HiddenSize)
	w.t("layers.self_attn.sinks", "attention", kindVector, n.Attention(), c.NumAttentionHeads)
	w.ffn("layers.", n, f.ffn)
}
