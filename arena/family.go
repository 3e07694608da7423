package arena

// Family is the architecture class of a model, set by the parser of its
// model_type's family (family_<name>.go). It describes the model; what is
// read and sized follows the family registered for the model_type, never
// Family.
type Family uint8

// The architecture classes.
const (
	// FamilyDense: a standard decoder with a dense MLP in every layer, such
	// as llama and qwen3; also any unknown model_type planned as dense.
	FamilyDense Family = iota + 1
	// FamilyMoE: a standard decoder whose MLPs are routed experts in some or
	// every layer, such as mixtral, qwen3_moe and gpt_oss.
	FamilyMoE
	// FamilyGDNHybrid: Gated DeltaNet linear attention mixed with gated full
	// attention (qwen3_next).
	FamilyGDNHybrid
	// FamilyMLA: multi-head latent attention plus MoE (deepseek_v2, deepseek_v3).
	FamilyMLA
	// FamilyDeepSeekV4: compressed/sliding MQA with a 512-wide latent head,
	// grouped O-projection and hyper-connections (deepseek_v4).
	FamilyDeepSeekV4
	// FamilyMamba2Hybrid: Mamba-2 SSM layers mixed with attention, MLP and
	// MoE layers by hybrid_override_pattern (nemotron_h).
	FamilyMamba2Hybrid
)

var familyNames = [...]string{
	FamilyDense:        "dense",
	FamilyMoE:          "moe",
	FamilyGDNHybrid:    "gdn_hybrid",
	FamilyMLA:          "mla",
	FamilyDeepSeekV4:   "deepseek_v4",
	FamilyMamba2Hybrid: "mamba2_hybrid",
}

// String is the family's snake_case name ("gdn_hybrid").
func (f Family) String() string {
	if int(f) >= len(familyNames) || familyNames[f] == "" {
		return "family(?)"
	}
	return familyNames[f]
}

// MixerKind is what mixes tokens in one layer.
type MixerKind uint8

// The token mixers.
const (
	// MixerNone: the layer has no token mixer (a nemotron_h "-" or "E" layer).
	MixerNone MixerKind = iota
	// MixerFullAttention: softmax attention over the whole sequence; these
	// layers hold paged KV-cache blocks.
	MixerFullAttention
	// MixerSlidingAttention: softmax attention over the last sliding_window
	// tokens (gpt_oss "sliding_attention", deepseek_v4 compress ratio 0).
	MixerSlidingAttention
	// MixerCompressedAttention: deepseek_v4 attention over a history
	// compressed by compress_ratios[i] (> 1) plus a sliding window.
	MixerCompressedAttention
	// MixerGDN: Gated DeltaNet linear attention (qwen3_next "linear_attention").
	MixerGDN
	// MixerMamba2: a Mamba-2 SSD layer (nemotron_h "M").
	MixerMamba2
)

var mixerNames = [...]string{
	MixerNone:                "none",
	MixerFullAttention:       "full_attention",
	MixerSlidingAttention:    "sliding_attention",
	MixerCompressedAttention: "compressed_attention",
	MixerGDN:                 "linear_attention",
	MixerMamba2:              "mamba2",
}

// String is the mixer's name, as in HF layer_types where one exists.
func (k MixerKind) String() string {
	if int(k) >= len(mixerNames) {
		return "mixer(?)"
	}
	return mixerNames[k]
}

// FFNKind is the feed-forward block of one layer.
type FFNKind uint8

// The feed-forward kinds.
const (
	// FFNNone: no feed-forward block (a nemotron_h "M" or "*" layer).
	FFNNone FFNKind = iota
	// FFNDense: a dense MLP of intermediate_size.
	FFNDense
	// FFNMoE: routed experts (plus shared experts where the family has them).
	FFNMoE
)

var ffnNames = [...]string{FFNNone: "none", FFNDense: "dense_mlp", FFNMoE: "moe"}

// String is the FFN kind's name ("dense_mlp").
func (k FFNKind) String() string {
	if int(k) >= len(ffnNames) {
		return "ffn(?)"
	}
	return ffnNames[k]
}

// Layer is what one decoder layer contains.
type Layer struct {
	// Mixer is the layer's token mixer (MixerNone for a nemotron_h "-"/"E" layer).
	Mixer MixerKind
	// FFN is the layer's feed-forward block (FFNNone for a nemotron_h "M"/"*" layer).
	FFN FFNKind
}

// LayerCounts counts layers by kind; it is derived from ModelConfig.Layers.
type LayerCounts struct {
	// Token mixers: layers whose Mixer is MixerFullAttention,
	// MixerSlidingAttention, MixerCompressedAttention, MixerGDN, MixerMamba2.
	FullAttention       int64
	SlidingAttention    int64
	CompressedAttention int64
	GDN                 int64
	Mamba2              int64
	// Feed-forward blocks: layers whose FFN is FFNMoE, FFNDense.
	MoE      int64
	DenseMLP int64
}

// Attention is the number of softmax-attention layers of any kind (full,
// sliding, compressed): the layers that need qkv_output and attn_output.
func (c LayerCounts) Attention() int64 {
	return c.FullAttention + c.SlidingAttention + c.CompressedAttention
}

// countLayers tallies layers by kind.
func countLayers(layers []Layer) LayerCounts {
	var c LayerCounts
	for _, l := range layers {
		switch l.Mixer {
		case MixerFullAttention:
			c.FullAttention++
		case MixerSlidingAttention:
			c.SlidingAttention++
		case MixerCompressedAttention:
			c.CompressedAttention++
		case MixerGDN:
			c.GDN++
		case MixerMamba2:
			c.Mamba2++
		}
		switch l.FFN {
		case FFNMoE:
			c.MoE++
		case FFNDense:
			c.DenseMLP++
		}
	}
	return c
}
