package arena

import "fmt"

// qwen3Next: Qwen3-Next (modeling_qwen3_next.py): gated GQA full attention
// (Qwen3NextAttention: q_proj emits query and output gate, q/k norms) mixed
// with Gated DeltaNet linear attention (Qwen3NextGatedDeltaNet), and MoE
// with a shared expert gated by shared_expert_gate (Qwen3NextSparseMoeBlock).
type qwen3Next struct{}

func init() { registerFamily(qwen3Next{}, "qwen3_next") }

// parse reads the GDN dims from linear_*; layer i is full (gated) attention
// when layer_types says so, else when (i+1) % full_attention_interval == 0,
// and Gated DeltaNet otherwise. Experts are optional (num_experts).
func (qwen3Next) parse(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyGDNHybrid
	c.GatedAttention = true
	c.QKNorm = true
	parseCore(r, c)
	resolveHeadDim(r, c, "head_dim")
	g := &GDNConfig{
		NumKeyHeads:   r.required("linear_num_key_heads"),
		NumValueHeads: r.required("linear_num_value_heads"),
		KeyHeadDim:    r.required("linear_key_head_dim"),
		ValueHeadDim:  r.required("linear_value_head_dim"),
		ConvKernel:    r.optional("linear_conv_kernel_dim", 4),
	}
	if r.err == nil && g.NumValueHeads%g.NumKeyHeads != 0 {
		r.fail("linear_num_value_heads", g.NumValueHeads,
			fmt.Sprintf("is not a multiple of linear_num_key_heads (%d)", g.NumKeyHeads))
	}
	c.GDN = g
	mixers := readLayerTypes(r, c, map[string]MixerKind{
		"full_attention":   MixerFullAttention,
		"linear_attention": MixerGDN,
	})
	if mixers == nil && r.err == nil {
		if !r.has("full_attention_interval") {
			r.fail("full_attention_interval", nil, "is required when layer_types is absent")
			return
		}
		interval := r.required("full_attention_interval")
		if r.err != nil {
			return
		}
		mixers = uniform(c.NumLayers, MixerGDN)
		for i := range mixers {
			if int64(i+1)%interval == 0 {
				mixers[i] = MixerFullAttention
			}
		}
	}
	readExperts(r, c, false, "num_experts")
	qwenSharedExpert(r, c)
	ffns := qwenFFNs(r, c)
	buildLayers(r, c, mixers, ffns)
}

// shape is gated GQA attention and the GDN dims.
func (qwen3Next) shape(c *ModelConfig) (modelShape, error) {
	return modelShape{attn: newGQA(c), gdn: c.GDN}, nil
}

// layers adds every layer's two norms, the gated attention layers, the GDN
// layers and the FFNs.
func (qwen3Next) layers(w *weightBuilder) {
	c, n := w.cfg, w.cfg.Counts
	w.layerNorms("layers.", int64(len(c.Layers)))
	w.gqa("layers.", n.Attention())
	if c.GDN != nil {
		w.gdn("layers.", n.GDN, c.GDN)
	}
	w.ffn("layers.", n, ffnStyle{sharedExpertGate: true})
}
