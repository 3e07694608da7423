package arena

import (
	"fmt"
	"strings"
)

// familyParsers maps a known model_type to the parser of its family.
var familyParsers = map[string]func(*fieldReader, *ModelConfig){
	"llama":       parseDense,
	"mistral":     parseDense,
	"qwen2":       parseDense,
	"qwen3":       parseDense,
	"mixtral":     parseMoE,
	"qwen2_moe":   parseMoE,
	"qwen3_moe":   parseMoE,
	"gpt_oss":     parseMoE,
	"qwen3_next":  parseQwen3Next,
	"deepseek_v2": parseMLA,
	"deepseek_v3": parseMLA,
	"deepseek_v4": parseDeepSeekV4,
	"nemotron_h":  parseNemotronH,
}

// standardLayerTypes are the layer_types a standard decoder may list.
var standardLayerTypes = map[string]MixerKind{
	"full_attention":    MixerFullAttention,
	"sliding_attention": MixerSlidingAttention,
}

// standardMixers reads layer_types, else gives the family default: gpt_oss
// alternates sliding and full attention starting with sliding (GptOssConfig:
// "sliding_attention" if (i+1) % 2 else "full_attention"); every other
// standard decoder is full attention in every layer, even with a
// sliding_window (planned as full attention, which over- rather than
// under-sizes the KV cache). Sliding layers need a positive sliding_window.
func standardMixers(r *fieldReader, c *ModelConfig) []MixerKind {
	mixers := readLayerTypes(r, c, standardLayerTypes)
	if r.err != nil {
		return nil
	}
	if mixers == nil {
		mixers = uniform(c.NumLayers, MixerFullAttention)
		if c.ModelType == "gpt_oss" {
			for i := range mixers {
				if (i+1)%2 == 1 {
					mixers[i] = MixerSlidingAttention
				}
			}
		} else if c.SlidingWindow > 0 {
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

// parseDense: llama, mistral, qwen2, qwen3 (modeling_llama.py): standard
// GQA attention and a dense MLP of intermediate_size in every layer.
func parseDense(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyDense
	parseCore(r, c)
	resolveHeadDim(r, c, "head_dim")
	mixers := standardMixers(r, c)
	if r.err != nil {
		return
	}
	buildLayers(r, c, mixers, uniform(c.NumLayers, FFNDense))
}

// expertCountField is the field each MoE model_type names its expert count with.
var expertCountField = map[string]string{
	"mixtral":   "num_local_experts",
	"gpt_oss":   "num_local_experts",
	"qwen2_moe": "num_experts",
	"qwen3_moe": "num_experts",
}

// parseMoE: mixtral, gpt_oss (num_local_experts), qwen2_moe, qwen3_moe
// (num_experts, decoder_sparse_step, mlp_only_layers, optional shared expert).
func parseMoE(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyMoE
	parseCore(r, c)
	resolveHeadDim(r, c, "head_dim")
	mixers := standardMixers(r, c)
	readExperts(r, c, true, expertCountField[c.ModelType], "num_local_experts", "num_experts")
	qwenSharedExpert(r, c)
	ffns := qwenFFNs(r, c)
	buildLayers(r, c, mixers, ffns)
}

// qwenSharedExpert reads shared_expert_intermediate_size (qwen2_moe, qwen3_next):
// one always-on expert of that width.
func qwenSharedExpert(r *fieldReader, c *ModelConfig) {
	c.SharedExpertIntermediateSize = r.optional("shared_expert_intermediate_size", 0)
	if c.SharedExpertIntermediateSize > 0 {
		c.NumSharedExperts = 1
	}
}

// parseQwen3Next: modeling_qwen3_next.py. GDN dims from linear_*; layer i is
// full (gated) attention when layer_types says so, else when
// (i+1) % full_attention_interval == 0, and Gated DeltaNet otherwise.
func parseQwen3Next(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyGDNHybrid
	c.GatedAttention = true
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

// parseMLA: modeling_deepseek_v3.py. Every layer is MLA; layer i is MoE when
// n_routed_experts is set, i >= first_k_dense_replace and i % moe_layer_freq == 0.
func parseMLA(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyMLA
	parseCore(r, c)
	m := &MLAConfig{
		QLoRARank:     r.optional("q_lora_rank", 0),
		KVLoRARank:    r.required("kv_lora_rank"),
		QKRopeHeadDim: r.required("qk_rope_head_dim"),
		QKNopeHeadDim: r.required("qk_nope_head_dim"),
		VHeadDim:      r.required("v_head_dim"),
	}
	c.MLA = m
	if r.err == nil {
		d, err := CheckedAdd("qk head dim", m.QKNopeHeadDim, m.QKRopeHeadDim)
		if err != nil {
			r.fail("qk_nope_head_dim", m.QKNopeHeadDim, "+ qk_rope_head_dim overflows int64")
		}
		c.HeadDim = d
	}
	readExperts(r, c, false, "n_routed_experts")
	sharedExperts(r, c)
	firstDense := r.nonNegative("first_k_dense_replace", 0)
	freq := r.optional("moe_layer_freq", 1)
	if r.err != nil {
		return
	}
	ffns := make([]FFNKind, c.NumLayers)
	for i := range ffns {
		ffns[i] = FFNDense
		if c.NumExperts > 0 && int64(i) >= firstDense && int64(i)%freq == 0 {
			ffns[i] = FFNMoE
		}
	}
	buildLayers(r, c, uniform(c.NumLayers, MixerFullAttention), ffns)
}

// parseDeepSeekV4: DeepSeek-V4 (vLLM deepseek_v4.py). The config has no
// kv_lora_rank, qk_nope_head_dim or v_head_dim: the single KV head of
// head_dim is the latent (K = V), of which qk_rope_head_dim is rotary.
// compress_ratios[i] ≤ 1 makes layer i sliding-window only; a larger ratio
// makes it compressed attention. Extra compress_ratios entries (MTP/draft
// layers) are ignored. Every layer is MoE when n_routed_experts is set.
func parseDeepSeekV4(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyDeepSeekV4
	parseCore(r, c)
	c.HeadDim = r.required("head_dim")
	v := &DeepSeekV4Config{
		QLoRARank:     r.required("q_lora_rank"),
		QKRopeHeadDim: r.required("qk_rope_head_dim"),
		OGroups:       r.required("o_groups"),
		OLoRARank:     r.required("o_lora_rank"),
		HCMult:        r.nonNegative("hc_mult", 0),
		IndexHeadDim:  r.nonNegative("index_head_dim", 0),
		IndexNHeads:   r.nonNegative("index_n_heads", 0),
		NumHashLayers: r.nonNegative("num_hash_layers", 0),
	}
	c.DeepSeekV4 = v
	switch {
	case r.err != nil:
	case v.QKRopeHeadDim >= c.HeadDim:
		r.fail("qk_rope_head_dim", v.QKRopeHeadDim, fmt.Sprintf("must be less than head_dim (%d)", c.HeadDim))
	case c.NumAttentionHeads%v.OGroups != 0:
		r.fail("o_groups", v.OGroups, fmt.Sprintf("does not divide num_attention_heads (%d)", c.NumAttentionHeads))
	case !r.has("compress_ratios"):
		r.fail("compress_ratios", nil, "is required (missing or null)")
	case c.SlidingWindow == 0:
		r.fail("sliding_window", nil, "is required and positive: every deepseek_v4 layer has a sliding window")
	}
	ratios := r.ints("compress_ratios", entriesLimit)
	if r.err != nil {
		return
	}
	if int64(len(ratios)) < c.NumLayers {
		r.fail("compress_ratios", int64(len(ratios)),
			fmt.Sprintf("has that many entries but num_hidden_layers is %d", c.NumLayers))
		return
	}
	v.CompressRatios = ratios[:c.NumLayers]
	mixers := make([]MixerKind, c.NumLayers)
	for i, ratio := range v.CompressRatios {
		switch {
		case ratio < 0:
			r.fail(fmt.Sprintf("compress_ratios[%d]", i), ratio, "must not be negative")
			return
		case ratio <= 1:
			mixers[i] = MixerSlidingAttention
		default:
			mixers[i] = MixerCompressedAttention
		}
	}
	readExperts(r, c, false, "n_routed_experts")
	sharedExperts(r, c)
	ffn := FFNDense
	if c.NumExperts > 0 {
		ffn = FFNMoE
	}
	buildLayers(r, c, mixers, uniform(c.NumLayers, ffn))
	c.Notes = append(c.Notes, fmt.Sprintf("deepseek_v4: no kv_lora_rank/qk_nope_head_dim/v_head_dim in the config; "+
		"the single KV head of head_dim %d is the latent (K = V)", c.HeadDim))
}

// nemotronLayers maps a hybrid_override_pattern character to its layer
// (modeling_nemotron_h.py: M mamba, * attention, - MLP, E MoE).
var nemotronLayers = map[byte]Layer{
	'M': {Mixer: MixerMamba2},
	'*': {Mixer: MixerFullAttention},
	'-': {FFN: FFNDense},
	'E': {FFN: FFNMoE},
}

// parseNemotronH: modeling_nemotron_h.py. Each hybrid_override_pattern
// character is one layer. d_inner = mamba_num_heads × mamba_head_dim (not
// expand × hidden_size). The attention head size is head_dim, else
// attention_head_dim, else hidden_size / num_attention_heads.
func parseNemotronH(r *fieldReader, c *ModelConfig) {
	c.Family = FamilyMamba2Hybrid
	parseCore(r, c)
	resolveHeadDim(r, c, "head_dim", "attention_head_dim")
	pattern := r.str("hybrid_override_pattern")
	switch {
	case r.err != nil:
		return
	case !r.has("hybrid_override_pattern"):
		r.fail("hybrid_override_pattern", nil, "is required (missing or null)")
		return
	case int64(len(pattern)) != c.NumLayers:
		r.fail("hybrid_override_pattern", clip(pattern),
			fmt.Sprintf("has %d characters but num_hidden_layers is %d", len(pattern), c.NumLayers))
		return
	}
	c.Layers = make([]Layer, len(pattern))
	for i := 0; i < len(pattern); i++ {
		l, ok := nemotronLayers[pattern[i]]
		if !ok {
			r.fail(fmt.Sprintf("hybrid_override_pattern[%d]", i), clip(string(pattern[i])),
				"unknown layer kind; want M (Mamba-2), * (attention), - (MLP) or E (MoE)")
			return
		}
		c.Layers[i] = l
	}
	if strings.ContainsRune(pattern, 'M') {
		parseMamba(r, c)
	}
	if strings.ContainsRune(pattern, 'E') {
		readExperts(r, c, true, "n_routed_experts")
		c.SharedExpertIntermediateSize = r.optional("moe_shared_expert_intermediate_size", 0)
		def := int64(0)
		if c.SharedExpertIntermediateSize > 0 {
			def = 1
		}
		c.NumSharedExperts = r.nonNegative("n_shared_experts", def)
	}
	if r.err == nil && strings.ContainsRune(pattern, '-') && c.IntermediateSize == 0 {
		r.fail("intermediate_size", nil, "is required: hybrid_override_pattern has MLP (-) layers")
	}
}

// parseMamba reads the Mamba-2 mixer fields of nemotron_h.
func parseMamba(r *fieldReader, c *ModelConfig) {
	m := &MambaConfig{
		NumHeads:   r.required("mamba_num_heads"),
		HeadDim:    r.required("mamba_head_dim"),
		StateSize:  r.required("ssm_state_size"),
		NumGroups:  r.required("n_groups"),
		ConvKernel: r.required("conv_kernel"),
		ChunkSize:  r.required("chunk_size"),
	}
	expand := r.optional("expand", 0)
	if r.err != nil {
		return
	}
	if m.NumHeads%m.NumGroups != 0 {
		r.fail("n_groups", m.NumGroups, fmt.Sprintf("does not divide mamba_num_heads (%d)", m.NumHeads))
		return
	}
	d, err := CheckedMul("mamba d_inner", m.NumHeads, m.HeadDim)
	if err != nil {
		r.fail("mamba_head_dim", m.HeadDim, "× mamba_num_heads overflows int64")
		return
	}
	m.DInner = d
	c.Mamba = m
	if e, err := CheckedMul("expand × hidden_size", expand, c.HiddenSize); err == nil && expand > 0 && e != d {
		c.Notes = append(c.Notes, fmt.Sprintf(
			"Mamba-2 d_inner = mamba_num_heads × mamba_head_dim = %d (expand × hidden_size would be %d)", d, e))
	}
}
