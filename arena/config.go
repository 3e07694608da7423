package arena

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// MaxLayers is the most decoder layers ParseConfig accepts (num_hidden_layers,
// and so the entries of layer_types); it bounds the per-layer table a
// hostile config could make ParseConfig build. More is a *ConfigError
// wrapping ErrConfigTooLarge.
const MaxLayers = 1 << 16

// ModelConfig is a parsed and validated Hugging Face config.json: the raw
// sizes the buffer table needs plus what is derived from them (family,
// per-layer kinds, resolved head_dim). Sizes are in elements unless a field
// says otherwise. Build one with ParseConfig or LoadConfig.
type ModelConfig struct {
	// ModelType is model_type as written ("qwen3_next", "gemma3"); "" when
	// absent.
	ModelType string
	// TextModelType is the language model's model_type when the config
	// nests it under text_config (or, as Qwen2.5-VL's original config,
	// keeps its fields at the top level next to vision_config):
	// text_config.model_type, else the multimodal family's default
	// ("gemma3_text", "qwen2"); "" for a text-only config. Every size
	// below is the language model's.
	TextModelType string
	// Architectures is the architectures list, informational.
	Architectures []string
	// Family is the architecture class ModelType's family states
	// (FamilyDense for an unknown type); descriptive only.
	Family Family

	// HiddenSize (H, hidden_size).
	HiddenSize int64
	// IntermediateSize (I, intermediate_size) is the dense MLP width; 0 when
	// the config has none (deepseek_v4).
	IntermediateSize int64
	// NumLayers is num_hidden_layers (len(Layers)).
	NumLayers int64
	// NumAttentionHeads (Hq, num_attention_heads).
	NumAttentionHeads int64
	// NumKVHeads (Hkv, num_key_value_heads; default Hq). It divides Hq.
	NumKVHeads int64
	// HeadDim (D) is head_dim (nemotron_h: head_dim, else attention_head_dim),
	// else hidden_size / num_attention_heads. For MLA it is the q/k head
	// width qk_nope_head_dim + qk_rope_head_dim.
	HeadDim int64
	// VocabSize (V, vocab_size).
	VocabSize int64
	// MaxPositionEmbeddings is max_position_embeddings in tokens; 0 when absent.
	MaxPositionEmbeddings int64
	// TorchDType is torch_dtype (or the newer dtype) as written ("bfloat16");
	// "" when absent (gpt_oss). Activations are planned in BF16 regardless.
	TorchDType string
	// TieWordEmbeddings is tie_word_embeddings; false when absent.
	TieWordEmbeddings bool
	// SlidingWindow is sliding_window in tokens; 0 when absent or null.
	SlidingWindow int64
	// Quantization is quantization_config; nil when absent.
	Quantization *Quantization
	// ExpertDType is expert_dtype as written ("fp4", deepseek_v4); "" when absent.
	ExpertDType string
	// NumNextNPredictLayers is num_nextn_predict_layers, the multi-token
	// prediction layers stored after the decoder layers (deepseek_v3,
	// deepseek_v4); 0 when absent.
	NumNextNPredictLayers int64
	// MambaSSMCacheDType is mamba_ssm_cache_dtype as written ("float32",
	// nemotron_h), the recurrent state's dtype; "" when absent.
	MambaSSMCacheDType string
	// RopeScaling is rope_scaling (or rope_parameters), one entry per
	// layer type in transformers v5's nested form; nil when absent. It
	// bounds max_seq_len (MaxSeqLenLimit).
	RopeScaling []RopeScaling

	// NumExperts (E) is the routed expert count (num_local_experts,
	// num_experts or n_routed_experts); 0 for a model without MoE.
	NumExperts int64
	// NumExpertsPerTok (K, num_experts_per_tok); 0 without MoE.
	NumExpertsPerTok int64
	// MoEIntermediateSize (Im) is one routed expert's width:
	// moe_intermediate_size, else intermediate_size (mixtral, gpt_oss).
	MoEIntermediateSize int64
	// NumSharedExperts is n_shared_experts (deepseek, nemotron_h), else 1 when
	// a shared expert width is given (qwen3_next), else 0.
	NumSharedExperts int64
	// SharedExpertIntermediateSize is the total width of the shared expert
	// MLP: shared_expert_intermediate_size (qwen), moe_shared_expert_intermediate_size
	// (nemotron_h), or n_shared_experts × moe_intermediate_size (deepseek,
	// as DeepseekV3MoE builds it); 0 when there is none.
	SharedExpertIntermediateSize int64

	// GatedAttention is true when full attention also projects an output gate
	// of Hq·D (qwen3_next: q_proj emits query and gate).
	GatedAttention bool
	// AttentionBias is true when q_proj, k_proj and v_proj have biases
	// ([Hq·D], [Hkv·D], [Hkv·D]): set by the family (qwen2, qwen2_moe,
	// gpt_oss), or read from the config (attention_bias) by a family whose
	// modeling file reads it.
	AttentionBias bool
	// QKNorm is true when each query and key head is RMS-normalised before
	// RoPE, with q_norm and k_norm weights of [D]: set by the family (qwen3,
	// qwen3_moe, qwen3_next), or read from the config (use_qk_norm) by a
	// family whose modeling file reads it.
	QKNorm bool
	// MLA holds the latent-attention ranks; nil unless FamilyMLA.
	MLA *MLAConfig
	// GDN holds the Gated DeltaNet dims; nil unless FamilyGDNHybrid.
	GDN *GDNConfig
	// Mamba holds the Mamba-2 dims; nil unless the model has Mamba-2 layers.
	Mamba *MambaConfig
	// DeepSeekV4 holds the DeepSeek-V4 attention fields; nil unless FamilyDeepSeekV4.
	DeepSeekV4 *DeepSeekV4Config

	// Vision is the vision tower of a multimodal config (vision_config);
	// nil for a text-only one. Only its weights are sized: PlanFor plans
	// the language model.
	Vision *VisionConfig

	// Layers is one entry per decoder layer (len == NumLayers).
	Layers []Layer
	// Counts tallies Layers by kind.
	Counts LayerCounts
	// Notes explains parsing choices (defaults taken, unknown model_type);
	// PlanFor copies them into Plan.Notes.
	Notes []string
}

// Quantization is quantization_config, informational: activations are
// planned the same whatever the weights' format.
type Quantization struct {
	// Method is quant_method ("fp8", "mxfp4").
	Method string
	// Format is fmt ("e4m3"); "" when absent.
	Format string
	// ActivationScheme is activation_scheme ("dynamic"); "" when absent.
	ActivationScheme string
	// WeightBlockSize is weight_block_size ([128, 128]); nil when absent.
	WeightBlockSize []int64
	// ModulesToNotConvert is modules_to_not_convert; nil when absent.
	ModulesToNotConvert []string
}

// MLAConfig is multi-head latent attention (DeepSeek-V2/V3,
// modeling_deepseek_v3.py DeepseekV3Attention).
type MLAConfig struct {
	// QLoRARank is q_lora_rank (q_a_proj width); 0 when null (q_proj is direct).
	QLoRARank int64
	// KVLoRARank is kv_lora_rank, the latent cached per token.
	KVLoRARank int64
	// QKRopeHeadDim is qk_rope_head_dim, the rotary part of each q/k head
	// (and the shared rotary key cached next to the latent).
	QKRopeHeadDim int64
	// QKNopeHeadDim is qk_nope_head_dim, the non-rotary part of each q/k head.
	QKNopeHeadDim int64
	// VHeadDim is v_head_dim, each head's value (and o_proj input) width.
	VHeadDim int64
}

// GDNConfig is Gated DeltaNet linear attention (modeling_qwen3_next.py
// Qwen3NextGatedDeltaNet).
type GDNConfig struct {
	// NumKeyHeads (nk, linear_num_key_heads).
	NumKeyHeads int64
	// NumValueHeads (nv, linear_num_value_heads); a multiple of nk.
	NumValueHeads int64
	// KeyHeadDim (dk, linear_key_head_dim).
	KeyHeadDim int64
	// ValueHeadDim (dv, linear_value_head_dim).
	ValueHeadDim int64
	// ConvKernel is linear_conv_kernel_dim (default 4).
	ConvKernel int64
}

// MambaConfig is a Mamba-2 mixer (modeling_nemotron_h.py NemotronHMamba2Mixer).
type MambaConfig struct {
	// NumHeads is mamba_num_heads.
	NumHeads int64
	// HeadDim is mamba_head_dim.
	HeadDim int64
	// DInner is NumHeads × HeadDim, the SSM inner width (not expand × hidden_size).
	DInner int64
	// StateSize (d_state, ssm_state_size).
	StateSize int64
	// NumGroups (n_groups); it divides NumHeads.
	NumGroups int64
	// ConvKernel is conv_kernel.
	ConvKernel int64
	// ChunkSize is chunk_size, the SSD scan chunk in tokens.
	ChunkSize int64
}

// qkvzWidth is in_proj_qkvz's width, 2·nk·dk + 2·nv·dv
// (modeling_qwen3_next.py: query and key of key_dim = nk·dk, value and z of
// value_dim = nv·dv), computed through s.
func (g *GDNConfig) qkvzWidth(s *sizer) int64 {
	return s.add(s.mul(2, g.NumKeyHeads, g.KeyHeadDim), s.mul(2, g.NumValueHeads, g.ValueHeadDim))
}

// convDim is the causal conv1d's channels, 2·nk·dk + nv·dv
// (modeling_qwen3_next.py conv_dim), computed through s.
func (g *GDNConfig) convDim(s *sizer) int64 {
	return s.add(s.mul(2, g.NumKeyHeads, g.KeyHeadDim), s.mul(g.NumValueHeads, g.ValueHeadDim))
}

// convDim is the causal conv1d's channels, d_inner + 2·n_groups·d_state
// (modeling_nemotron_h.py conv_dim), computed through s.
func (m *MambaConfig) convDim(s *sizer) int64 {
	return s.add(m.DInner, s.mul(2, m.NumGroups, m.StateSize))
}

// DeepSeekV4Config is the DeepSeek-V4 attention (vLLM deepseek_v4.py): one
// shared KV head of head_dim (the latent; K = V), queries from a q_lora_rank
// bottleneck, and an O-projection grouped into o_groups low-rank blocks.
type DeepSeekV4Config struct {
	// QLoRARank is q_lora_rank.
	QLoRARank int64
	// QKRopeHeadDim is qk_rope_head_dim, the rotary tail of the head_dim latent.
	QKRopeHeadDim int64
	// OGroups is o_groups; it divides num_attention_heads.
	OGroups int64
	// OLoRARank is o_lora_rank, each O group's bottleneck width.
	OLoRARank int64
	// HCMult is hc_mult, the hyper-connection stream count; 0 for none.
	HCMult int64
	// IndexHeadDim is index_head_dim, the lightning indexer's key width on
	// ratio-4 layers; 0 when absent.
	IndexHeadDim int64
	// IndexNHeads is index_n_heads, the lightning indexer's query heads; 0
	// when absent.
	IndexNHeads int64
	// NumHashLayers is num_hash_layers: the first layers route experts by a
	// token-id hash table (tid2eid) instead of scores; 0 when absent.
	NumHashLayers int64
	// CompressRatios is compress_ratios cut to num_hidden_layers (extra
	// entries belong to MTP/draft layers). Ratio ≤ 1: sliding window only.
	CompressRatios []int64
}

// looksLikeSafetensors reports whether data begins as a safetensors file
// does: an 8-byte little-endian header length that fits the data, then the
// header's '{'.
func looksLikeSafetensors(data []byte) bool {
	return len(data) > 9 && data[8] == '{' && binary.LittleEndian.Uint64(data[:8]) <= uint64(len(data)-8)
}

// ParseConfig parses and validates a Hugging Face config.json. Every problem
// is a *ConfigError naming the field and its value, wrapping ErrInvalidConfig:
// empty input, not a JSON object, a required size missing, zero or negative,
// a value past int64, heads that do not divide, a layer_types or
// hybrid_override_pattern of the wrong length or with unknown entries.
// Input past a limit also wraps ErrConfigTooLarge: more than MaxConfigBytes
// (refused before it is decoded), more than MaxLayers layers, a vocab_size
// past int32 (token ids are int32), an array of
// more than MaxArchitectures, MaxLayers (layer_types) or MaxArrayEntries
// entries (refused before its entries are decoded). An unknown model_type
// that has hidden_size, num_attention_heads, num_hidden_layers, vocab_size
// and intermediate_size is parsed as FamilyDense with a note, unless it has
// routed-expert fields: that is a *ConfigError on model_type wrapping
// ErrUnsupportedMoE. Values quoted in errors are cut to 64 runes.
// ParseConfig never panics.
func ParseConfig(data []byte) (*ModelConfig, error) {
	if len(data) > MaxConfigBytes {
		return nil, tooLargeInput(int64(len(data)), true)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &ConfigError{Reason: "empty input"}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		if looksLikeSafetensors(data) {
			return nil, &ConfigError{Reason: "a safetensors file, not a config.json: give the config, or the model folder that holds both", Err: err}
		}
		return nil, &ConfigError{Reason: "not a JSON object: " + err.Error(), Err: err}
	}
	if obj == nil {
		return nil, &ConfigError{Reason: "not a JSON object: null"}
	}
	r := &fieldReader{obj: obj}
	c := &ModelConfig{ModelType: r.str("model_type")}
	specFor(c.ModelType).parse(r, c)
	if r.err != nil {
		return nil, r.err
	}
	c.Counts = countLayers(c.Layers)
	return c, nil
}
