package arena

import (
	"fmt"
	"strings"
)

// nemotronH: Nemotron-H (modeling_nemotron_h.py): each layer is one block of
// hybrid_override_pattern, a Mamba-2 mixer (M), GQA attention (*), a relu²
// MLP (-) or an MoE of relu² experts with a shared expert and an F32
// e_score_correction_bias (E), each behind one RMSNorm.
type nemotronH struct{}

func init() { registerFamily(nemotronH{}, "nemotron_h") }

// nemotronLayers maps a hybrid_override_pattern character to its layer
// (modeling_nemotron_h.py: M mamba, * attention, - MLP, E MoE).
var nemotronLayers = map[byte]Layer{
	'M': {Mixer: MixerMamba2},
	'*': {Mixer: MixerFullAttention},
	'-': {FFN: FFNDense},
	'E': {FFN: FFNMoE},
}

// parse reads each hybrid_override_pattern character as one layer. d_inner
// = mamba_num_heads × mamba_head_dim (not expand × hidden_size). The
// attention head size is head_dim, else attention_head_dim, else
// hidden_size / num_attention_heads.
func (nemotronH) parse(r *fieldReader, c *ModelConfig) {
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

// shape is GQA attention and the Mamba-2 dims.
func (nemotronH) shape(c *ModelConfig) (modelShape, error) {
	return modelShape{attn: newGQA(c), mamba: c.Mamba}, nil
}

// layers adds one pre-norm [H] per block (NemotronHBlock, whatever its
// mixer), the attention, Mamba-2 and FFN blocks.
func (nemotronH) layers(w *weightBuilder) {
	c, n := w.cfg, w.cfg.Counts
	w.t("layers.norm", "norms", kindVector, int64(len(c.Layers)), c.HiddenSize)
	w.gqa("layers.", n.Attention())
	if c.Mamba != nil {
		w.mamba("layers.", n.Mamba2, c.Mamba)
	}
	w.ffn("layers.", n, ffnStyle{relu2: true, scoreCorrectionBias: true})
}
