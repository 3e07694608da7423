package arena

import (
	"fmt"
	"math"
	"strings"
)

// parseCore reads the fields every family shares. Order matters: the first
// problem found is the one reported, so hidden_size comes first.
func parseCore(r *fieldReader, c *ModelConfig) {
	c.Architectures = r.strings("architectures", architecturesLimit)
	c.HiddenSize = r.required("hidden_size")
	c.NumLayers = r.required("num_hidden_layers")
	if c.NumLayers > MaxLayers {
		r.failWith("num_hidden_layers", c.NumLayers, fmt.Sprintf("exceeds the supported maximum of %d layers (arena.MaxLayers)", MaxLayers),
			ErrConfigTooLarge)
		c.NumLayers = 0
	}
	c.NumAttentionHeads = r.required("num_attention_heads")
	c.NumKVHeads = r.optional("num_key_value_heads", c.NumAttentionHeads)
	if r.err == nil && c.NumAttentionHeads%c.NumKVHeads != 0 {
		r.fail("num_key_value_heads", c.NumKVHeads,
			fmt.Sprintf("does not divide num_attention_heads (%d)", c.NumAttentionHeads))
	}
	c.VocabSize = r.required("vocab_size")
	if c.VocabSize > math.MaxInt32 {
		// vLLM holds token ids as int32 (vllm/v1/worker/gpu_model_runner.py,
		// input_ids).
		r.failWith("vocab_size", c.VocabSize, fmt.Sprintf("exceeds %d: token ids are int32", math.MaxInt32), ErrConfigTooLarge)
		c.VocabSize = 0
	}
	c.IntermediateSize = r.optional("intermediate_size", 0)
	c.MaxPositionEmbeddings = r.optional("max_position_embeddings", 0)
	c.TorchDType = r.str("torch_dtype")
	if c.TorchDType == "" {
		c.TorchDType = r.str("dtype")
	}
	c.TieWordEmbeddings = r.bool("tie_word_embeddings")
	c.SlidingWindow = r.nonNegative("sliding_window", 0)
	c.ExpertDType = r.str("expert_dtype")
	c.NumNextNPredictLayers = r.nonNegative("num_nextn_predict_layers", 0)
	c.MambaSSMCacheDType = r.str("mamba_ssm_cache_dtype")
	c.RopeScaling = parseRopeScaling(r)
	c.Quantization = parseQuantization(r)
}

// parseQuantization reads quantization_config; nil when absent.
func parseQuantization(r *fieldReader) *Quantization {
	q := r.object("quantization_config")
	if q == nil {
		return nil
	}
	out := &Quantization{
		Method:              q.str("quant_method"),
		Format:              q.str("fmt"),
		ActivationScheme:    q.str("activation_scheme"),
		WeightBlockSize:     q.ints("weight_block_size", entriesLimit),
		ModulesToNotConvert: q.strings("modules_to_not_convert", entriesLimit),
	}
	if q.err != nil && r.err == nil {
		r.err = q.err
	}
	return out
}

// resolveHeadDim sets HeadDim from the first present field of names, else
// hidden_size / num_attention_heads, which must then divide exactly.
func resolveHeadDim(r *fieldReader, c *ModelConfig, names ...string) {
	for _, n := range names {
		if r.has(n) {
			c.HeadDim = r.required(n)
			return
		}
	}
	if r.err != nil {
		return
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		r.fail("num_attention_heads", c.NumAttentionHeads,
			fmt.Sprintf("does not divide hidden_size (%d) and head_dim is absent", c.HiddenSize))
		return
	}
	c.HeadDim = c.HiddenSize / c.NumAttentionHeads
}

// readLayerTypes reads layer_types into mixer kinds; nil when absent. The
// list must have num_hidden_layers entries, each a key of allowed.
func readLayerTypes(r *fieldReader, c *ModelConfig, allowed map[string]MixerKind) []MixerKind {
	types := r.strings("layer_types", layersLimit)
	if types == nil || r.err != nil {
		return nil
	}
	if int64(len(types)) != c.NumLayers {
		r.fail("layer_types", int64(len(types)),
			fmt.Sprintf("has that many entries but num_hidden_layers is %d", c.NumLayers))
		return nil
	}
	out := make([]MixerKind, len(types))
	for i, t := range types {
		k, ok := allowed[t]
		if !ok {
			r.fail(fmt.Sprintf("layer_types[%d]", i), clip(t), "unknown layer type; want one of "+joinKeys(allowed))
			return nil
		}
		out[i] = k
	}
	return out
}

// joinKeys lists a layer-type map's keys in a stable order for messages.
func joinKeys(m map[string]MixerKind) string {
	names := make([]string, 0, len(m))
	for _, k := range []MixerKind{MixerFullAttention, MixerSlidingAttention, MixerGDN} {
		for name, v := range m {
			if v == k {
				names = append(names, fmt.Sprintf("%q", name))
			}
		}
	}
	return strings.Join(names, ", ")
}

// readExperts sets NumExperts from the first present of names and, when it
// is positive, NumExpertsPerTok and MoEIntermediateSize (moe_intermediate_size,
// else intermediate_size). With required, a missing expert count is an error.
func readExperts(r *fieldReader, c *ModelConfig, required bool, names ...string) {
	for _, n := range names {
		if r.has(n) {
			c.NumExperts = r.nonNegative(n, 0)
			break
		}
	}
	if r.err != nil {
		return
	}
	if c.NumExperts == 0 {
		if required {
			r.fail(names[0], nil, fmt.Sprintf("is required and positive for model_type %q", clip(c.ModelType)))
		}
		return
	}
	c.NumExpertsPerTok = r.required("num_experts_per_tok")
	if r.err == nil && c.NumExpertsPerTok > c.NumExperts {
		r.fail("num_experts_per_tok", c.NumExpertsPerTok,
			fmt.Sprintf("exceeds the routed expert count (%d)", c.NumExperts))
	}
	c.MoEIntermediateSize = r.optional("moe_intermediate_size", c.IntermediateSize)
	if r.err == nil && c.MoEIntermediateSize == 0 {
		r.fail("moe_intermediate_size", nil, "is required (intermediate_size is absent too)")
	}
}

// qwenFFNs returns each layer's FFN by the Qwen MoE rule (modeling_qwen3_moe.py):
// layer i is MoE when experts exist, i is not in mlp_only_layers and
// (i+1) % decoder_sparse_step == 0; otherwise it is a dense MLP. Mixtral and
// gpt_oss have neither field, so every layer is MoE.
func qwenFFNs(r *fieldReader, c *ModelConfig) []FFNKind {
	step := r.optional("decoder_sparse_step", 1)
	mlpOnly := map[int64]bool{}
	for i, l := range r.ints("mlp_only_layers", entriesLimit) {
		if l < 0 || l >= c.NumLayers {
			r.fail(fmt.Sprintf("mlp_only_layers[%d]", i), l,
				fmt.Sprintf("is not a layer index in [0, %d)", c.NumLayers))
		}
		mlpOnly[l] = true
	}
	if r.err != nil {
		return nil
	}
	ffns := make([]FFNKind, c.NumLayers)
	for i := range ffns {
		ffns[i] = FFNDense
		if c.NumExperts > 0 && !mlpOnly[int64(i)] && int64(i+1)%step == 0 {
			ffns[i] = FFNMoE
		}
	}
	return ffns
}

// qwenSharedExpert reads shared_expert_intermediate_size (qwen2_moe, qwen3_next):
// one always-on expert of that width.
func qwenSharedExpert(r *fieldReader, c *ModelConfig) {
	c.SharedExpertIntermediateSize = r.optional("shared_expert_intermediate_size", 0)
	if c.SharedExpertIntermediateSize > 0 {
		c.NumSharedExperts = 1
	}
}

// sharedExperts sets the shared expert as n_shared_experts (def when
// absent) × moe_intermediate_size (DeepseekV3MoE builds one MLP of that
// width).
func sharedExperts(r *fieldReader, c *ModelConfig, def int64) {
	c.NumSharedExperts = r.nonNegative("n_shared_experts", def)
	if r.err != nil || c.NumExperts == 0 {
		return
	}
	w, err := CheckedMul("shared expert width", c.NumSharedExperts, c.MoEIntermediateSize)
	if err != nil {
		r.fail("n_shared_experts", c.NumSharedExperts, "× moe_intermediate_size overflows int64")
		return
	}
	c.SharedExpertIntermediateSize = w
}

// buildLayers zips mixers and FFNs into c.Layers and checks that dense MLP
// layers have an intermediate_size.
func buildLayers(r *fieldReader, c *ModelConfig, mixers []MixerKind, ffns []FFNKind) {
	if r.err != nil {
		return
	}
	c.Layers = make([]Layer, c.NumLayers)
	for i := range c.Layers {
		c.Layers[i] = Layer{Mixer: mixers[i], FFN: ffns[i]}
		if ffns[i] == FFNDense && c.IntermediateSize == 0 {
			r.fail("intermediate_size", nil,
				fmt.Sprintf("is required: layer %d has a dense MLP", i))
			return
		}
	}
}

// uniform returns n copies of v.
func uniform[T any](n int64, v T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}
