package arena

import "fmt"

// decoder is the standard decoder (modeling_llama.py LlamaDecoderLayer):
// per layer input_layernorm, GQA attention (full or sliding),
// post_attention_layernorm, then a dense MLP or an MoE block built in ffn's
// style. A family built like it embeds it for shape and layers and writes
// parse.
type decoder struct{ ffn ffnStyle }

// shape is GQA attention and nothing else.
func (decoder) shape(c *ModelConfig) (modelShape, error) { return modelShape{attn: newGQA(c)}, nil }

// layers adds every layer's two norms, GQA attention and FFN.
func (d decoder) layers(w *weightBuilder) {
	n := w.cfg.Counts
	w.layerNorms("layers.", int64(len(w.cfg.Layers)))
	w.gqa("layers.", n.Attention())
	w.ffn("layers.", n, d.ffn)
}

// standardLayerTypes are the layer_types a standard decoder may list.
var standardLayerTypes = map[string]MixerKind{
	"full_attention":    MixerFullAttention,
	"sliding_attention": MixerSlidingAttention,
}

// standardMixers reads layer_types, else gives def's mixers; with a nil def
// every layer is full attention, even with a sliding_window (planned as full
// attention, which over- rather than under-sizes the KV cache; a note says
// so). Sliding layers need a positive sliding_window.
func standardMixers(r *fieldReader, c *ModelConfig, def func(n int64) []MixerKind) []MixerKind {
	mixers := readLayerTypes(r, c, standardLayerTypes)
	if r.err != nil {
		return nil
	}
	switch {
	case mixers != nil:
	case def != nil:
		mixers = def(c.NumLayers)
	default:
		mixers = uniform(c.NumLayers, MixerFullAttention)
		if c.SlidingWindow > 0 {
			c.Notes = append(c.Notes, fmt.Sprintf(
				"sliding_window %d without layer_types: every layer planned as full attention", c.SlidingWindow))
		}
	}
	for _, m := range mixers {
		if m == MixerSlidingAttention && c.SlidingWindow == 0 {
			r.fail("sliding_window", nil, "is required and positive: the model has sliding_attention layers")
			return nil
		}
	}
	return mixers
}

// parseDense reads a standard dense decoder: GQA attention (head_dim, else
// hidden_size / num_attention_heads) and a dense MLP of intermediate_size in
// every layer.
func parseDense(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyDense
	parseCore(r, c)
	resolveHeadDim(r, c, "head_dim")
	mixers := standardMixers(r, c, nil)
	if r.err != nil {
		return
	}
	buildLayers(r, c, mixers, uniform(c.NumLayers, FFNDense))
}

// parseMoE reads a standard decoder with routed experts: the expert count
// from expertCount (else num_local_experts, else num_experts), the Qwen
// decoder_sparse_step and mlp_only_layers (qwenFFNs) and an optional
// shared expert (qwenSharedExpert). def gives the mixers when layer_types
// is absent (see standardMixers).
func parseMoE(r *fieldReader, c *ModelConfig, expertCount string, def func(n int64) []MixerKind) {
	c.Family = FamilyMoE
	parseCore(r, c)
	resolveHeadDim(r, c, "head_dim")
	mixers := standardMixers(r, c, def)
	readExperts(r, c, true, expertCount, "num_local_experts", "num_experts")
	qwenSharedExpert(r, c)
	ffns := qwenFFNs(r, c)
	buildLayers(r, c, mixers, ffns)
}
