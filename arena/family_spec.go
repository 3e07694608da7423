package arena

import (
	"fmt"
	"slices"
)

// familySpec is one model family: everything arena knows about it that
// depends on which model it is. Each family is one file, family_<name>.go,
// that registers its spec for its model_type names (registerFamily, from an
// init function). The rest of the package reads a family only through this
// interface and the modelShape it returns: it never dispatches on
// model_type, on Family or on which sub-config of ModelConfig is set.
// Readers:
//
//   - ParseConfig calls parse;
//   - PlanFor (the buffer table), NewKVLayout and EstimateWeights call shape
//     (through shapeOf) and read the modelShape it returns;
//   - EstimateWeights calls layers and, when the family implements
//     mtpFamily, mtpLayers, and when it implements visionFamily, vision.
//
// A family built like the standard decoder embeds decoder, which gives it
// shape and layers, and writes only parse.
type familySpec interface {
	// parse reads the family's fields of r into c: the core fields
	// (parseCore), c.Family, the per-layer kinds and the family's own
	// sizes. ParseConfig has set c.ModelType; problems go to r.
	parse(r *fieldReader, c *ModelConfig)
	// shape is what the buffer table and the KV layout read of c. Errors:
	// a *ConfigError when c lacks a sub-config the family reads (a
	// ModelConfig built by hand rather than by ParseConfig).
	shape(c *ModelConfig) (modelShape, error)
	// layers adds the weight tensors of the decoder layers of w.cfg (all
	// of them, counted by w.cfg.Counts), named "layers.<tensor>": every
	// tensor between embed_tokens and the final norm.
	layers(w *weightBuilder)
}

// mtpFamily is a familySpec that models its multi-token-prediction layers
// (num_nextn_predict_layers); EstimateWeights notes that the MTP layers of
// any other family are not modelled.
type mtpFamily interface {
	familySpec
	// mtpLayers adds the family's tensors of n MTP layers named under p,
	// between the shared embed_tokens, enorm and hnorm and the shared
	// shared_head.norm and shared_head.head (see weightBuilder.mtp).
	mtpLayers(w *weightBuilder, p string, n int64)
}

// visionFamily is a familySpec of a multimodal model (family_multimodal.go):
// EstimateWeights calls vision after the language model's tensors.
type visionFamily interface {
	familySpec
	// vision adds the vision tower's and the projector's tensors, each under
	// its checkpoint name (tensorForm.checkpoint), none read by a text
	// token (ActiveCount 0).
	vision(w *weightBuilder)
}

// modelShape is what the buffer table and the KV layout read of a model,
// as its family states it: plain data, widths in elements.
type modelShape struct {
	// attn is the model's attention kind (every softmax-attention layer of
	// a model is of one kind).
	attn attention
	// gdn is the Gated DeltaNet dims of a model that has GDN layers; nil
	// when its family has none.
	gdn *GDNConfig
	// mamba is the Mamba-2 dims of a model that has Mamba-2 layers; nil
	// when it has none.
	mamba *MambaConfig
	// norms are the widths of the family's own norms and low-rank
	// projections that norm_unit_w must also cover, besides H, D, the FFN
	// widths, the GDN head dims, Mamba-2's d_inner and hcMult·H (MLA:
	// q_lora_rank, kv_lora_rank, v_head_dim).
	norms []int64
	// oGroups and oLoRARank are the grouped O-projection (DeepSeek-V4
	// o_groups, o_lora_rank); oGroups is 0 without one.
	oGroups, oLoRARank int64
	// hcMult is the hyper-connection stream count (DeepSeek-V4 hc_mult); 0
	// without hyper-connections.
	hcMult int64
}

// attention is an attention kind as the buffer table and the KV layout see
// it. Widths are per token, in elements; arithmetic goes through s, so an
// overflow names what s is sizing.
type attention interface {
	// qkvWidth is the fused attention input projection's output width
	// (qkv_output's row).
	qkvWidth(s *sizer) int64
	// outWidth is o_proj's input width (attn_output's row).
	outWidth(s *sizer) int64
	// decodeValueDim is the per-head value width the split-K decode kernel
	// accumulates (splitk_workspace).
	decodeValueDim() int64
	// kv is what the attention layers cache per token and per sequence.
	kv(s *sizer) kvShape
}

// kvShape is what a model's attention layers cache: groups of paged layers,
// one group of sliding-window layers, and per-sequence compressor state.
type kvShape struct {
	// paged are the layer groups whose cache grows with the sequence.
	paged []kvLayers
	// sliding is the layers that keep the last window tokens of a sequence
	// (ratio 1); window is that many tokens.
	sliding kvLayers
	window  int64
	// compressorState is one sequence's compressor state in bytes
	// (DeepSeek-V4 CompressorStateCache).
	compressorState int64
}

// kvLayers is layers layers that each cache width elements of KVDType per
// ratio tokens (ratio 1: every token; DeepSeek-V4 compressed layers: one
// entry per compress_ratio tokens). kvHeads > 0 splits width into K and V
// of kvHeads heads each (width = 2·kvHeads·head_dim, GQA); 0 is one latent
// of width (MLA, DeepSeek-V4). state is one sequence's compressor state of
// each of the layers, in bytes (DeepSeek-V4; 0 otherwise). KVCacheGroups
// reads kvHeads and state to lay the cache out.
type kvLayers struct {
	layers, width, ratio int64
	kvHeads, state       int64
}

// families maps each registered model_type to its family's spec.
var families = map[string]familySpec{}

// registerFamily registers spec for each of modelTypes; a family file calls
// it from its init function. It panics on a name registered twice, a
// mistake in this package's source that every test run would show.
func registerFamily(spec familySpec, modelTypes ...string) {
	for _, t := range modelTypes {
		if _, dup := families[t]; dup {
			panic(fmt.Sprintf("arena: model_type %q is registered twice", t))
		}
		families[t] = spec
	}
}

// specFor is the spec of modelType's family: the registered one, else
// unknownFamily (planned as dense, or refused when it declares experts).
func specFor(modelType string) familySpec {
	if spec, ok := families[modelType]; ok {
		return spec
	}
	return unknownFamily{}
}

// shapeOf is c's family spec and shape. Errors: those of familySpec.shape.
// A model_type no family registers whose config nested a language model
// (TextModelType set) is genericMultimodal's.
func shapeOf(c *ModelConfig) (familySpec, modelShape, error) {
	spec := specFor(c.ModelType)
	if _, unknown := spec.(unknownFamily); unknown && c.TextModelType != "" {
		spec = genericMultimodal
	}
	shape, err := spec.shape(c)
	return spec, shape, err
}

// knownModelTypes is every registered model_type, sorted.
func knownModelTypes() []string {
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// missingSubConfig is the *ConfigError for a ModelConfig of family
// modelType that lacks the sub-config holding field: one not built by
// ParseConfig.
func missingSubConfig(modelType, field string) *ConfigError {
	return &ConfigError{Field: field, Reason: fmt.Sprintf("is required for model_type %q and absent: "+
		"build the *ModelConfig with ParseConfig or LoadConfig", clip(modelType))}
}
