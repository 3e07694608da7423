package arena

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuarena/gpuarena/checkpoint"
)

// ErrNoCheckpointNames is wrapped by the *CheckpointNamesError of
// CheckpointTensors for a model_type whose checkpoint names arena does not
// list. Test with errors.Is.
var ErrNoCheckpointNames = errors.New("arena: checkpoint tensor names are not listed for this model_type")

// CheckpointNamesError says why CheckpointTensors cannot list a model's
// tensors; it unwraps to ErrNoCheckpointNames.
type CheckpointNamesError struct {
	// ModelType is the config's model_type.
	ModelType string
	// Reason says what is not listed.
	Reason string
}

// Error is `arena: checkpoint names of model_type "T": reason`.
func (e *CheckpointNamesError) Error() string {
	return fmt.Sprintf("arena: checkpoint names of model_type %q: %s", clip(e.ModelType), e.Reason)
}

// Unwrap returns ErrNoCheckpointNames.
func (e *CheckpointNamesError) Unwrap() error { return ErrNoCheckpointNames }

// checkpointNaming is how a family's Hugging Face checkpoint names the
// roles of weightBuilder's tensors ("layers.mlp.experts.gate_proj"). Module
// names come from the family's modeling file, as its state_dict writes them.
type checkpointNaming struct {
	// root is the decoder's module ("model", NemotronHForCausalLM's
	// "backbone", Gemma3ForConditionalGeneration's "language_model.model");
	// embed and finalNorm are its embedding and final norm ("embed_tokens"
	// and "norm"; Nemotron-H "embeddings" and "norm_f").
	root, embed, finalNorm string
	// lmHead is the LM head's module ("lm_head";
	// Gemma3ForConditionalGeneration's "language_model.lm_head").
	lmHead string
	// attn and mlp are a layer's attention and dense MLP modules
	// ("self_attn", "mlp"; Nemotron-H's single "mixer" for both).
	attn, mlp string
	// moe is the MoE block's module: "mlp" (Qwen*MoeSparseMoeBlock,
	// DeepseekV3MoE, Glm4MoeMoE, GptOssMLP) or "block_sparse_moe"
	// (MixtralDecoderLayer.block_sparse_moe).
	moe string
	// router is the router's module inside moe: "gate" (most), "router"
	// (GptOssMLP.router).
	router string
	// experts renames the routed experts' gate_proj, up_proj and down_proj
	// (MixtralBlockSparseTop2MLP: w1, w3, w2); nil keeps them.
	experts map[string]string
	// sharedExpert is the shared expert's module inside mlp:
	// "shared_experts" (DeepseekV3MoE, Glm4MoeMoE) or "shared_expert"
	// (Qwen2MoeSparseMoeBlock, Qwen3NextSparseMoeBlock).
	sharedExpert string
	// fusedExperts: the experts of a layer are stacked in one tensor per
	// projection (GptOssExperts), not one module per expert.
	fusedExperts bool
}

// standardNaming is the module names of modeling_llama.py and the
// families built like it (model.embed_tokens, model.layers.N.self_attn,
// model.layers.N.mlp, model.norm), MoE under mlp with router gate and
// shared_experts.
func standardNaming() checkpointNaming {
	return checkpointNaming{root: "model", embed: "embed_tokens", finalNorm: "norm", lmHead: "lm_head", attn: "self_attn", mlp: "mlp",
		moe: "mlp", router: "gate", sharedExpert: "shared_experts"}
}

// checkpointNamer is a familySpec whose checkpoint names CheckpointTensors
// lists for c; ok is false when the family's names are not known (an
// unknown model_type planned as Llama).
type checkpointNamer interface {
	checkpointNames(c *ModelConfig) (n checkpointNaming, ok bool)
}

// checkpointNames: the standard decoder's modules (modeling_llama.py,
// modeling_qwen3.py, modeling_qwen3_moe.py, modeling_glm4_moe.py): mlp,
// mlp.gate, mlp.experts.E.{gate,up,down}_proj, mlp.shared_experts.
func (decoder) checkpointNames(*ModelConfig) (checkpointNaming, bool) { return standardNaming(), true }

// checkpointNames: none; an unknown model_type's names are a guess.
func (unknownFamily) checkpointNames(*ModelConfig) (checkpointNaming, bool) {
	return checkpointNaming{}, false
}

// checkpointNames: modeling_mixtral.py MixtralSparseMoeBlock as
// block_sparse_moe, its gate and experts.E.w1 (gate), w3 (up), w2 (down)
// (mistralai/Mixtral-8x7B-v0.1 model.safetensors.index.json).
func (mixtral) checkpointNames(*ModelConfig) (checkpointNaming, bool) {
	n := standardNaming()
	n.moe, n.experts = "block_sparse_moe", map[string]string{"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}
	return n, true
}

// checkpointNames: modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock:
// mlp.shared_expert and mlp.shared_expert_gate.
func (qwen2MoE) checkpointNames(*ModelConfig) (checkpointNaming, bool) {
	n := standardNaming()
	n.sharedExpert = "shared_expert"
	return n, true
}

// checkpointNames: modeling_qwen3_next.py Qwen3NextSparseMoeBlock, as
// Qwen2-MoE's.
func (qwen3Next) checkpointNames(*ModelConfig) (checkpointNaming, bool) {
	n := standardNaming()
	n.sharedExpert = "shared_expert"
	return n, true
}

// checkpointNames: modeling_gpt_oss.py GptOssMLP: mlp.router (weight,
// bias) and mlp.experts with stacked gate_up_proj and down_proj (as
// openai/gpt-oss-20b stores them: *_blocks and *_scales in MXFP4).
func (gptOSS) checkpointNames(*ModelConfig) (checkpointNaming, bool) {
	n := standardNaming()
	n.router, n.fusedExperts = "router", true
	return n, true
}

// checkpointNames: modeling_deepseek_v3.py DeepseekV3MoE: mlp.gate,
// mlp.experts.E, mlp.shared_experts; FP8 projections carry
// weight_scale_inv (deepseek-ai/DeepSeek-V3 model.safetensors.index.json).
func (deepseek) checkpointNames(*ModelConfig) (checkpointNaming, bool) { return standardNaming(), true }

// checkpointNames: modeling_nemotron_h.py NemotronHForCausalLM:
// backbone.embeddings, backbone.layers.N.norm and one mixer per block
// (NemotronHMamba2Mixer, NemotronHAttention, NemotronHMLP or NemotronHMOE
// with gate, experts.E and shared_experts), backbone.norm_f (as
// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 stores them).
func (nemotronH) checkpointNames(*ModelConfig) (checkpointNaming, bool) {
	return checkpointNaming{root: "backbone", embed: "embeddings", finalNorm: "norm_f", lmHead: "lm_head", attn: "mixer", mlp: "mixer",
		moe: "mixer", router: "gate", sharedExpert: "shared_experts"}, true
}

// CheckpointTensors lists cfg's weights tensor by tensor as a Hugging Face
// checkpoint of its family stores them: the names of the family's modeling
// file's state_dict ("model.embed_tokens.weight",
// "model.layers.0.self_attn.q_proj.weight",
// "model.layers.3.mlp.experts.17.down_proj.weight",
// "model.layers.0.block_sparse_moe.experts.1.w3.weight", "lm_head.weight"
// unless tie_word_embeddings), their safetensors dtypes and their shapes as
// torch stores them (nn.Linear [out, in], nn.Embedding [V, H], conv1d
// [channels, 1, kernel]), in model order (embed_tokens, layer by layer,
// norm, lm_head, then a multimodal model's vision tower and projector), as
// save_pretrained writes and shards them. It lists what
// EstimateWeights(cfg, opts) counts (the MTP layers only with
// opts.IncludeMTP, as model.layers.<num_hidden_layers + i>, DeepSeek-V3's
// layout) as the checkpoint stores it, so the bytes of the listing sum to
// WeightReport.CheckpointBytes exactly (WeightReport.Bytes adds the
// engine's padding).
//
// Dtypes: bf16 weights are BF16 (F16 when torch_dtype is float16 and no
// opts.DType overrides it); fp8
// blocks are an F8_E4M3 weight [out, in] and an F32 weight_scale_inv
// [⌈out/block⌉, ⌈in/block⌉]; gpt-oss's MXFP4 experts are per layer
// <proj>_blocks U8 [E, out, ⌈in/32⌉, 16] and <proj>_scales U8 [E, out,
// ⌈in/32⌉] (their biases BF16 [E, out]); unquantized fused experts are
// [E, in, out] (GptOssExperts.gate_up_proj).
//
// Families listed: llama, mistral, qwen2, qwen2_moe, qwen3, qwen3_moe,
// mixtral, gpt_oss, glm4_moe, qwen3_next, deepseek_v2, deepseek_v3,
// nemotron_h (backbone.embeddings, backbone.layers.N.mixer.*,
// backbone.norm_f), gemma3_text, and the multimodal gemma3, llava and
// mistral3 (language_model.model.*, vision_tower.*,
// multi_modal_projector.*) and qwen2_5_vl (model.*, visual.*). Errors:
// those of EstimateWeights; a *CheckpointNamesError (ErrNoCheckpointNames)
// for another model_type (deepseek_v4, an unknown one, a multimodal one
// arena does not register or whose vision tower it does not name) or a
// format the family's checkpoints do not use.
func CheckpointTensors(cfg *ModelConfig, opts WeightOptions) ([]checkpoint.TensorSpec, error) {
	if cfg == nil {
		return nil, &ConfigError{Reason: "nil *ModelConfig"}
	}
	spec, _, err := shapeOf(cfg)
	if err != nil {
		return nil, err
	}
	namer, ok := spec.(checkpointNamer)
	var naming checkpointNaming
	if ok {
		naming, ok = namer.checkpointNames(cfg)
	}
	if !ok {
		return nil, &CheckpointNamesError{ModelType: cfg.ModelType, Reason: "its family's checkpoint layout is not listed"}
	}
	f, _, err := resolveFormats(cfg, opts)
	if err != nil {
		return nil, err
	}
	w := &weightBuilder{sizer: sizer{what: "weight shape"}, cfg: cfg, f: f}
	w.model(spec)
	main, mainOrigins := w.tensors, w.origins
	w.tensors, w.origins = nil, nil
	nMTP := w.mtp(spec)
	if w.err != nil {
		return nil, w.err
	}
	l := &lister{cfg: cfg, f: f, naming: naming, bf16: checkpoint.BF16}
	if f.half {
		l.bf16 = checkpoint.F16
	}
	layers := int64(len(cfg.Layers))
	var top, tail, vision []int
	for i, t := range main {
		switch {
		case isVisionGroup(mainOrigins[i].group):
			vision = append(vision, i)
		case strings.HasPrefix(t.Name, "layers."):
		case t.Name == "embed_tokens":
			top = append(top, i)
		default:
			tail = append(tail, i)
		}
	}
	for _, i := range top {
		l.plain(naming.root+"."+naming.embed, main[i], mainOrigins[i])
	}
	for li := range layers {
		l.layer(li, "layers.", main, mainOrigins, func(o tensorOrigin) bool { return l.selects(cfg.Layers[li], o) })
	}
	if opts.IncludeMTP && nMTP > 0 {
		for m := range nMTP {
			l.layer(layers+m, "mtp.", w.tensors, w.origins, func(tensorOrigin) bool { return true })
		}
	}
	for _, i := range tail {
		name := naming.root + "." + main[i].Name
		switch main[i].Name {
		case "lm_head":
			name = naming.lmHead
		case "norm":
			name = naming.root + "." + naming.finalNorm
		}
		l.plain(name, main[i], mainOrigins[i])
	}
	l.vision(main, mainOrigins, vision)
	if l.err != nil {
		return nil, l.err
	}
	if err := l.checkCounts(main, mainOrigins, layers, 0); err != nil {
		return nil, err
	}
	if opts.IncludeMTP && nMTP > 0 {
		if err := l.checkCounts(w.tensors, w.origins, nMTP, nMTP); err != nil {
			return nil, err
		}
	}
	return l.out, nil
}

// lister expands weightBuilder's tensors into checkpoint tensors.
type lister struct {
	cfg    *ModelConfig
	f      formats
	naming checkpointNaming
	bf16   checkpoint.DType // the dtype of WeightBF16: BF16 or F16
	out    []checkpoint.TensorSpec
	// seen counts the instances listed per role, for checkCounts.
	seen map[string]int64
	err  error
}

// selects reports whether a decoder layer of kinds ly holds a tensor of
// origin o: norms every layer, attention the softmax-attention layers,
// linear_attention the GDN layers, mamba2 the Mamba-2 layers, mlp the dense
// FFN layers, moe_* the MoE layers.
func (l *lister) selects(ly Layer, o tensorOrigin) bool {
	switch o.group {
	case "norms":
		return true
	case "attention":
		return ly.Mixer == MixerFullAttention || ly.Mixer == MixerSlidingAttention || ly.Mixer == MixerCompressedAttention
	case "linear_attention":
		return ly.Mixer == MixerGDN
	case "mamba2":
		return ly.Mixer == MixerMamba2
	case "mlp":
		return ly.FFN == FFNDense
	case "moe_router", "moe_experts", "moe_shared_experts":
		return ly.FFN == FFNMoE
	}
	return false
}

// layer lists layer li's tensors: the roles of ts under prefix p that sel
// selects, in order, the routed experts one module at a time (expert 0's
// projections, then expert 1's) where the first of them stands.
func (l *lister) layer(li int64, p string, ts []WeightTensor, orgs []tensorOrigin, sel func(tensorOrigin) bool) {
	base := l.naming.root + ".layers." + strconv.FormatInt(li, 10) + "."
	expertsDone := false
	for i, t := range ts {
		role, ok := strings.CutPrefix(t.Name, p)
		if !ok {
			continue
		}
		if p == "mtp." {
			role = strings.TrimPrefix(role, "layers.")
		}
		o := orgs[i]
		if !sel(o) {
			continue
		}
		if o.group != "moe_experts" {
			l.plain(base+l.rename(role), t, o)
			l.count(t.Name, 1)
			continue
		}
		if l.naming.fusedExperts {
			l.fused(base, role, t, o)
			l.count(t.Name, l.cfg.NumExperts)
			continue
		}
		if expertsDone {
			continue
		}
		expertsDone = true
		for e := range l.cfg.NumExperts {
			ep := base + l.naming.moe + ".experts." + strconv.FormatInt(e, 10) + "."
			for j, u := range ts {
				r, ok := strings.CutPrefix(u.Name, p)
				if p == "mtp." {
					r = strings.TrimPrefix(r, "layers.")
				}
				proj, isExpert := strings.CutPrefix(r, "mlp.experts.")
				if !ok || !isExpert || orgs[j].group != "moe_experts" {
					continue
				}
				if n, ok := l.naming.experts[proj]; ok {
					proj = n
				}
				l.plain(ep+proj, u, orgs[j])
				l.count(u.Name, 1)
			}
		}
	}
}

// count adds n listed instances of role.
func (l *lister) count(role string, n int64) {
	if l.seen == nil {
		l.seen = map[string]int64{}
	}
	l.seen[role] += n
}

// checkCounts checks that every tensor of ts was listed Count times
// (extra of them, the MTP layers, listed once per extra layer): a tensor
// the layer kinds do not place is an internal mismatch, never a silent gap.
func (l *lister) checkCounts(ts []WeightTensor, orgs []tensorOrigin, layers, extra int64) error {
	for i, t := range ts {
		if !strings.HasPrefix(t.Name, "layers.") && !(extra > 0 && strings.HasPrefix(t.Name, "mtp.")) {
			continue
		}
		if got := l.seen[t.Name]; got != t.Count {
			return &CheckpointNamesError{ModelType: l.cfg.ModelType, Reason: fmt.Sprintf(
				"tensor %s (group %s): %d instances listed over %d layers, %d counted", t.Name, orgs[i].group, got, layers, t.Count)}
		}
	}
	return nil
}

// rename is role's name in the checkpoint under <root>.layers.N.: the
// family's attention, MLP, MoE, router and shared-expert modules.
func (l *lister) rename(role string) string {
	n := l.naming
	switch {
	case role == "mlp.gate" || strings.HasPrefix(role, "mlp.gate."):
		return n.moe + "." + n.router + strings.TrimPrefix(role, "mlp.gate")
	case strings.HasPrefix(role, "mlp.router."):
		return n.moe + "." + n.router + strings.TrimPrefix(role, "mlp.router")
	case strings.HasPrefix(role, "mlp.shared_experts."):
		return n.moe + "." + n.sharedExpert + strings.TrimPrefix(role, "mlp.shared_experts")
	case strings.HasPrefix(role, "mlp."):
		return n.mlp + strings.TrimPrefix(role, "mlp")
	case strings.HasPrefix(role, "self_attn."):
		return n.attn + strings.TrimPrefix(role, "self_attn")
	}
	return role
}

// paramName is name with ".weight" appended unless its last component is a
// parameter itself: a bias ("q_proj.bias", "dt_bias",
// "e_score_correction_bias"), sinks, A_log or D.
func paramName(name string) string {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "bias" || strings.HasSuffix(last, "_bias") || last == "sinks" || last == "A_log" || last == "D" {
		return name
	}
	return name + ".weight"
}

// plain lists one instance of t under name (".weight" added by paramName):
// its torch shape and dtype, plus weight_scale_inv for an fp8 block tensor.
func (l *lister) plain(name string, t WeightTensor, o tensorOrigin) {
	if l.err != nil {
		return
	}
	name = paramName(name)
	shape := append([]int64(nil), t.Shape...)
	if len(shape) == 2 {
		switch {
		case o.kind == kindLinear || o.kind == kindExpert || o.kind == kindHigh:
			shape[0], shape[1] = shape[1], shape[0] // [in, out] → nn.Linear's [out, in]
		case strings.HasSuffix(name, "conv1d.weight"):
			shape = []int64{shape[0], 1, shape[1]} // nn.Conv1d depthwise [channels, 1, kernel]
		}
	}
	if d, ok := l.dtype(t.Format); ok {
		l.add(name, d, shape)
		return
	}
	switch t.Format {
	case WeightFP8Block:
		out, in := shape[0], shape[1]
		bo, bi := l.f.blockOut, l.f.blockIn
		if o.kind == kindExpert {
			bo, bi = l.f.expertBOut, l.f.expertBIn
		}
		if bo <= 0 || bi <= 0 {
			bo, bi = out, in
		}
		l.add(name, checkpoint.F8E4M3, shape)
		l.add(strings.TrimSuffix(name, ".weight")+".weight_scale_inv", checkpoint.F32, []int64{ceilDiv(out, bo), ceilDiv(in, bi)})
	default:
		l.err = &CheckpointNamesError{ModelType: l.cfg.ModelType, Reason: fmt.Sprintf(
			"tensor %s: %v outside stacked experts is not listed", name, t.Format)}
	}
}

// fused lists one layer's stacked experts of role (GptOssExperts): a
// projection [in, out] as <proj>_blocks U8 [E, out, ⌈in/32⌉, 16] and
// <proj>_scales U8 [E, out, ⌈in/32⌉] in MXFP4 (openai/gpt-oss-20b), as
// <proj> [E, in, out] unquantized; a bias as <proj>_bias [E, out]. FP8
// stacked experts have no published layout: a *CheckpointNamesError.
func (l *lister) fused(base, role string, t WeightTensor, o tensorOrigin) {
	if l.err != nil {
		return
	}
	e := l.cfg.NumExperts
	name := base + l.naming.moe + ".experts." + strings.TrimPrefix(role, "mlp.experts.")
	d, plain := l.dtype(t.Format)
	if o.kind != kindExpert || len(t.Shape) != 2 {
		if !plain {
			l.err = &CheckpointNamesError{ModelType: l.cfg.ModelType, Reason: fmt.Sprintf("tensor %s: %v is not listed", name, t.Format)}
			return
		}
		l.add(name, d, append([]int64{e}, t.Shape...))
		return
	}
	in, out := t.Shape[0], t.Shape[1]
	switch {
	case t.Format == WeightMXFP4:
		blocks := ceilDiv(in, MXFP4BlockSize)
		l.add(name+"_blocks", checkpoint.U8, []int64{e, out, blocks, MXFP4BlockSize / 2})
		l.add(name+"_scales", checkpoint.U8, []int64{e, out, blocks})
	case plain:
		l.add(name, d, []int64{e, in, out})
	default:
		l.err = &CheckpointNamesError{ModelType: l.cfg.ModelType, Reason: fmt.Sprintf(
			"tensor %s: stacked experts in %v are not listed", name, t.Format)}
	}
}

// dtype is the safetensors dtype of an unquantized format: BF16 (F16 for
// a float16 model), F32, I32; ok is false for a quantized one.
func (l *lister) dtype(f WeightFormat) (d checkpoint.DType, ok bool) {
	switch f {
	case WeightBF16:
		return l.bf16, true
	case WeightF32:
		return checkpoint.F32, true
	case WeightI32:
		return checkpoint.I32, true
	}
	return 0, false
}

// add appends one tensor.
func (l *lister) add(name string, d checkpoint.DType, shape []int64) {
	l.out = append(l.out, checkpoint.TensorSpec{Name: name, DType: d, Shape: shape})
}
