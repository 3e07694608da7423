package arena

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// WeightFormat is how one weight tensor is stored on the device; it decides
// the tensor's bytes from its shape.
type WeightFormat uint8

// The weight formats EstimateWeights sizes.
const (
	// WeightBF16: 2 B per parameter (bfloat16; float16 is sized the same).
	WeightBF16 WeightFormat = iota + 1
	// WeightF32: 4 B per parameter.
	WeightF32
	// WeightI32: 4 B per element, an integer lookup table (DeepSeek-V4 tid2eid).
	WeightI32
	// WeightFP8Block: 1 B per parameter (float8 e4m3) plus one F32 scale per
	// block of quantization_config.weight_block_size (DeepSeek-V3: [128, 128],
	// weight_scale_inv [⌈out/128⌉, ⌈in/128⌉]); one scale per tensor when the
	// config gives no block size. Checkpoints with scale_fmt "ue8m0" store the
	// scale in 1 B: sizing it as 4 B over-counts by < 0.02% of the tensor.
	WeightFP8Block
	// WeightMXFP4: OCP microscaling FP4: a 4-bit E2M1 value per parameter and
	// one E8M0 scale byte per 32 parameters along the input dimension, i.e.
	// 17 B per 32 parameters = 4.25 bits per parameter (gpt-oss
	// *_blocks/*_scales; DeepSeek-V4 expert_dtype "fp4", vLLM Mxfp4MoEMethod).
	WeightMXFP4
)

var weightFormatNames = [...]string{
	WeightBF16:     "bf16",
	WeightF32:      "f32",
	WeightI32:      "i32",
	WeightFP8Block: "fp8_block",
	WeightMXFP4:    "mxfp4",
}

// String is the format's name ("bf16", "fp8_block", "mxfp4").
func (f WeightFormat) String() string {
	if int(f) >= len(weightFormatNames) || weightFormatNames[f] == "" {
		return fmt.Sprintf("weight_format(%d)", uint8(f))
	}
	return weightFormatNames[f]
}

// MarshalText writes the format's name, so JSON shows "mxfp4", not a number.
func (f WeightFormat) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText reads a name MarshalText wrote. Errors: an *OptionError for
// "weight_format" naming an unknown format.
func (f *WeightFormat) UnmarshalText(b []byte) error {
	for i, n := range weightFormatNames {
		if n != "" && n == string(b) {
			*f = WeightFormat(i)
			return nil
		}
	}
	return &OptionError{Option: "weight_format", Value: string(b), Reason: "unknown weight format"}
}

// MXFP4BlockSize is the number of parameters sharing one E8M0 scale byte in
// WeightMXFP4 (OCP Microscaling Formats v1.0, block size 32).
const MXFP4BlockSize = 32

// WeightOptions choose how EstimateWeights sizes the weights. The zero value
// sizes them as the config says (torch_dtype, quantization_config, expert_dtype).
type WeightOptions struct {
	// DType overrides the stored format: 0 keeps the config's; BF16 or F32
	// sizes every weight (quantized ones included) in that dtype; FP8 sizes
	// every projection (attention, MLP, experts) as WeightFP8Block with
	// 128×128 blocks and the rest (embeddings, norms, router, lm_head) as BF16.
	// Tensors a model always keeps in F32 or I32 stay so. Other dtypes are an
	// *OptionError for "weight_dtype".
	DType DType
	// IncludeMTP counts the multi-token-prediction layers
	// (num_nextn_predict_layers) in the totals, as a server running MTP
	// speculative decoding loads them. By default they are reported apart
	// (WeightReport.MTPTensors) and not counted: plain serving does not load them.
	IncludeMTP bool
	// CheckpointLayout sizes every tensor as the checkpoint stores it. By
	// default the weights are sized as the engine holds them: vLLM pads
	// MXFP4 routed experts to its kernel's tiles (MXFP4Backend), ~5 GiB on
	// gpt-oss-120b. Set it for a loader that uploads the checkpoint's bytes
	// unchanged (gpuarena's LoadWeights), or to compare with safetensors
	// sizes; WeightReport.CheckpointBytes gives those in either case.
	CheckpointLayout bool
	// MXFP4Backend is the vLLM MXFP4 MoE backend whose padding MXFP4 routed
	// experts are sized with; the zero value is MXFP4Marlin. Ignored with
	// CheckpointLayout and for models without MXFP4 experts. An unknown
	// value is an *OptionError for "mxfp4_backend".
	MXFP4Backend MXFP4Backend
}

// WeightTensor is one weight tensor of the model, repeated Count times (over
// layers, and over experts for routed experts).
type WeightTensor struct {
	// Name is the tensor's role, Hugging Face style without layer indices
	// ("layers.self_attn.q_proj", "layers.mlp.experts.down_proj"); a vision
	// tower's is its checkpoint name without the block index and ".weight"
	// ("visual.blocks.attn.qkv").
	Name string `json:"name"`
	// Group is the breakdown the tensor counts under (see WeightReport.Groups).
	Group string `json:"group"`
	// Shape is one instance's shape in elements, as the checkpoint stores
	// it: [in, out] for a projection (y = x·W, as design.md writes it), [V,
	// H] for an embedding, [n] for a vector (norm, bias, per-head
	// parameter); a vision tower's convolutions and position embeddings in
	// torch's layout ([out, in, kh, kw], [positions, H]).
	Shape []int64 `json:"shape"`
	// EngineShape is one instance's shape as the engine allocates it, when
	// that differs from Shape (vLLM's padded MXFP4 experts, MXFP4Backend);
	// nil when it is Shape.
	EngineShape []int64 `json:"engine_shape,omitempty"`
	// Count is how many instances the model holds: layers, or layers × E.
	Count int64 `json:"count"`
	// ActiveCount is how many instances one token's forward reads: Count,
	// MoE layers × K for a routed expert, 0 for a vision tower's tensor.
	ActiveCount int64 `json:"active_count"`
	// Format is how the checkpoint stores the tensor.
	Format WeightFormat `json:"format"`
	// EngineFormat is how the engine holds it, when that differs from
	// Format (vLLM's Triton MXFP4 backend converts expert biases to F32); 0
	// when it is Format.
	EngineFormat WeightFormat `json:"engine_format,omitempty"`
	// Params is Count × ∏Shape; ActiveParams is ActiveCount × ∏Shape.
	Params       int64 `json:"params"`
	ActiveParams int64 `json:"active_params"`
	// Bytes is Count × one instance's bytes as the engine holds it
	// (EngineShape and EngineFormat where set, scales included);
	// CheckpointBytes is Count × one instance's bytes in Shape and Format,
	// as the checkpoint stores it. They differ only for padded tensors.
	Bytes           int64 `json:"bytes"`
	CheckpointBytes int64 `json:"checkpoint_bytes"`
	// Lookup marks a table a token reads one row of (the input embedding,
	// DeepSeek-V4's tid2eid), excluded from ActiveParamsExclEmbedding.
	Lookup bool `json:"lookup,omitempty"`
}

// WeightGroup sums the tensors of one Group.
type WeightGroup struct {
	// Name is the group: "embedding", "attention", "linear_attention" (GDN),
	// "mamba2", "mlp" (dense), "moe_router", "moe_experts" (routed),
	// "moe_shared_experts", "hyper_connections", "norms", "lm_head",
	// "vision_tower", "multimodal_projector", "mtp".
	Name string `json:"name"`
	// Params, ActiveParams and Bytes are the sums of the group's tensors'.
	Params       int64 `json:"params"`
	ActiveParams int64 `json:"active_params"`
	Bytes        int64 `json:"bytes"`
}

// WeightReport is the estimated size of a model's weights on one device
// (no tensor or expert parallelism: every weight lives on the device).
type WeightReport struct {
	// ModelType is the config's model_type.
	ModelType string `json:"model_type"`
	// DType is the format of unquantized weights: from torch_dtype
	// (bfloat16/float16 → bf16, float32 → f32; absent → bf16 with a note) or
	// WeightOptions.DType.
	DType WeightFormat `json:"dtype"`
	// Tensors is every weight tensor of the served model, in model order.
	Tensors []WeightTensor `json:"tensors"`
	// Groups sums Tensors by group, in first-seen order; with
	// WeightOptions.IncludeMTP a last "mtp" group holds MTPTensors.
	Groups []WeightGroup `json:"groups"`
	// TotalParams is every parameter counted (MTP only with IncludeMTP).
	TotalParams int64 `json:"total_params"`
	// ActiveParams is the parameters one token's forward reads: every tensor
	// except the routed experts and a vision tower's, the input embedding
	// included, plus top-k routed experts per MoE layer. Mistral (Mixtral 12.9B) and Qwen
	// (Qwen3-30B-A3B 3.3B) publish this figure.
	ActiveParams int64 `json:"active_params"`
	// ActiveParamsExclEmbedding is ActiveParams without the lookup tables
	// (input embedding, tid2eid); the LM head stays. OpenAI (gpt-oss 5.1B)
	// and NVIDIA (Nemotron 3 Nano 3.2B) publish this figure.
	ActiveParamsExclEmbedding int64 `json:"active_params_excl_embedding"`
	// EmbeddingParams is the input embedding [V, H] (shared with the LM head
	// when tie_word_embeddings).
	EmbeddingParams int64 `json:"embedding_params"`
	// Bytes is the device bytes of Tensors (and MTPTensors with IncludeMTP)
	// as the engine holds them; CheckpointBytes is the same tensors as the
	// checkpoint stores them (the sum CheckpointTensors lists and a
	// safetensors index's total_size states), and EnginePaddingBytes is
	// Bytes − CheckpointBytes: the engine's padding (0 with
	// WeightOptions.CheckpointLayout).
	Bytes              int64 `json:"bytes"`
	CheckpointBytes    int64 `json:"checkpoint_bytes"`
	EnginePaddingBytes int64 `json:"engine_padding_bytes"`
	// MTPLayers is num_nextn_predict_layers as modelled (DeepSeek-V3/V4); 0
	// when the config has none or the family's MTP is not modelled.
	MTPLayers int64 `json:"mtp_layers"`
	// MTPTensors, MTPParams and MTPBytes are the multi-token-prediction
	// layers (their own embedding and head copies included, as checkpoints
	// store them).
	MTPTensors []WeightTensor `json:"mtp_tensors,omitempty"`
	MTPParams  int64          `json:"mtp_params"`
	MTPBytes   int64          `json:"mtp_bytes"`
	// MTPIncluded says whether the MTP layers are in the totals.
	MTPIncluded bool `json:"mtp_included"`
	// Notes says what was assumed (dtype defaults, quantization handling).
	Notes []string `json:"notes"`
}

// LogValue logs the report's totals.
func (r *WeightReport) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("dtype", r.DType.String()),
		slog.Int64("total_params", r.TotalParams),
		slog.Int64("active_params", r.ActiveParams),
		slog.Int64("bytes", r.Bytes),
		slog.Int64("checkpoint_bytes", r.CheckpointBytes),
		slog.Int64("mtp_params", r.MTPParams),
		slog.Bool("mtp_included", r.MTPIncluded),
	)
}

// MarshalJSON writes nil slices as [] so the JSON shape is stable.
func (r WeightReport) MarshalJSON() ([]byte, error) {
	type plain WeightReport
	p := plain(r)
	p.Tensors, p.Groups, p.Notes = nonNilSlice(p.Tensors), nonNilSlice(p.Groups), nonNilSlice(p.Notes)
	return json.Marshal(p)
}

// nonNilSlice returns s, or an empty slice for nil.
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// EstimateWeights sizes cfg's weights tensor by tensor, as its model_type's
// family composes them (familySpec.layers; the shared conventions are in
// weights_blocks.go): embeddings, attention of each kind, GDN and Mamba-2
// mixers, dense MLPs, routed and shared experts, routers, norms, the LM head
// unless tie_word_embeddings (then counted once, as the embedding), a
// multimodal model's vision tower and projector (weights_vision.go), and
// the MTP layers apart. Formats come from torch_dtype, quantization_config
// (fp8 with weight_block_size, mxfp4) and expert_dtype, or opts.DType.
// Bytes are as the engine holds the weights (vLLM's padded MXFP4 experts,
// MXFP4Backend) unless opts.CheckpointLayout; CheckpointBytes are as the
// checkpoint stores them. Errors: a *ConfigError for a nil cfg or one that
// lacks the sub-config its family reads, an *OptionError for an
// unsupported opts.DType or opts.MXFP4Backend, an *OverflowError.
func EstimateWeights(cfg *ModelConfig, opts WeightOptions) (*WeightReport, error) {
	if cfg == nil {
		return nil, &ConfigError{Reason: "nil *ModelConfig"}
	}
	spec, _, err := shapeOf(cfg)
	if err != nil {
		return nil, err
	}
	f, notes, err := resolveFormats(cfg, opts)
	if err != nil {
		return nil, err
	}
	w := &weightBuilder{sizer: sizer{what: "weight shape"}, cfg: cfg, f: f}
	w.model(spec)
	main := w.tensors
	w.tensors = nil
	mtpLayers := w.mtp(spec)
	mtp := w.tensors
	if w.err != nil {
		return nil, w.err
	}
	r := &WeightReport{
		ModelType:   cfg.ModelType,
		DType:       f.base,
		Tensors:     main,
		MTPLayers:   mtpLayers,
		MTPTensors:  mtp,
		MTPIncluded: opts.IncludeMTP && mtpLayers > 0,
		Notes:       append(notes, w.notes...),
	}
	if err := r.sum(); err != nil {
		return nil, err
	}
	if l := w.expertPad; l.padded() && r.EnginePaddingBytes > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("routed experts as vLLM's %v MXFP4 MoE backend holds them "+
			"(Mxfp4MoEMethod.create_weights): hidden %d → %d, expert width %d → %d%s: %d B (%s) more than the checkpoint's %d B; "+
			"set checkpoint_layout to size the checkpoint's bytes, or mxfp4_backend for another backend",
			w.f.mxfp4, cfg.HiddenSize, l.h, cfg.MoEIntermediateSize, l.im, biasNote(l), r.EnginePaddingBytes,
			HumanBytes(r.EnginePaddingBytes), r.CheckpointBytes))
	}
	r.Notes = append(r.Notes, singleDeviceNote)
	switch {
	case mtpLayers > 0 && !opts.IncludeMTP:
		r.Notes = append(r.Notes, fmt.Sprintf("%d MTP layer(s) (%d params, %d B) are reported apart and not counted: "+
			"set include_mtp to load them for MTP speculative decoding", mtpLayers, r.MTPParams, r.MTPBytes))
	case mtpLayers > 0:
		r.Notes = append(r.Notes, fmt.Sprintf("%d MTP layer(s) (%d params, %d B) are counted; their KV cache is not", mtpLayers, r.MTPParams, r.MTPBytes))
	}
	return r, nil
}

// sum fills the groups and totals from Tensors and MTPTensors.
func (r *WeightReport) sum() error {
	s := sizer{what: "weight totals"}
	idx := map[string]int{}
	for _, t := range r.Tensors {
		i, ok := idx[t.Group]
		if !ok {
			i = len(r.Groups)
			idx[t.Group] = i
			r.Groups = append(r.Groups, WeightGroup{Name: t.Group})
		}
		r.Groups[i].addTensor(&s, t)
		if t.Group == "embedding" {
			r.EmbeddingParams = s.add(r.EmbeddingParams, t.Params)
		}
	}
	mtp := WeightGroup{Name: "mtp"}
	for _, t := range r.MTPTensors {
		mtp.addTensor(&s, t)
	}
	r.MTPParams, r.MTPBytes = mtp.Params, mtp.Bytes
	counted := r.Tensors
	if r.MTPIncluded {
		r.Groups = append(r.Groups, mtp)
		counted = append(append([]WeightTensor(nil), r.Tensors...), r.MTPTensors...)
	}
	var total, lookups WeightGroup
	for _, t := range counted {
		total.addTensor(&s, t)
		r.CheckpointBytes = s.add(r.CheckpointBytes, t.CheckpointBytes)
		if t.Lookup {
			lookups.addTensor(&s, t)
		}
	}
	r.TotalParams, r.ActiveParams, r.Bytes = total.Params, total.ActiveParams, total.Bytes
	r.EnginePaddingBytes = r.Bytes - r.CheckpointBytes
	r.ActiveParamsExclEmbedding = total.ActiveParams - lookups.ActiveParams
	return s.err
}

// addTensor adds t's params, active params and bytes to g, through s.
func (g *WeightGroup) addTensor(s *sizer, t WeightTensor) {
	g.Params = s.add(g.Params, t.Params)
	g.ActiveParams = s.add(g.ActiveParams, t.ActiveParams)
	g.Bytes = s.add(g.Bytes, t.Bytes)
}

// tensorKind says how a tensor's format is chosen.
type tensorKind uint8

const (
	// kindEmbedding: an embedding table; base dtype, never quantized.
	kindEmbedding tensorKind = iota
	// kindLinear: a projection an fp8 quantization_config (or the FP8
	// override) quantizes: attention, dense MLP, shared experts, GDN/Mamba
	// in/out projections.
	kindLinear
	// kindExpert: a routed expert's projection: mxfp4 / expert_dtype / fp8.
	kindExpert
	// kindHigh: a projection checkpoints keep in the base dtype: router,
	// LM head, DeepSeek-V4 compressor and indexer weights_proj, V3 eh_proj.
	kindHigh
	// kindVector: norms, biases, conv1d, A_log, dt_bias, D, sinks; base dtype.
	kindVector
	// kindF32: always F32 (DeepSeek-V4 hyper-connections, attention sinks
	// and compressor ape; e_score_correction_bias).
	kindF32
	// kindI32: an integer lookup table (DeepSeek-V4 tid2eid).
	kindI32
)

// formats is the resolved format of each tensor kind.
type formats struct {
	base       WeightFormat
	linear     WeightFormat
	expert     WeightFormat
	blockOut   int64 // FP8 block rows (output dim); 0: whole tensor
	blockIn    int64 // FP8 block columns (input dim); 0: whole tensor
	expertBOut int64 // FP8 expert blocks, as blockOut/blockIn
	expertBIn  int64
	// half: the 2-byte unquantized tensors are float16 (torch_dtype
	// float16), not bfloat16; sized alike, listed as F16 by
	// CheckpointTensors. A weight_dtype override clears it.
	half bool
	// checkpointLayout and mxfp4 are WeightOptions.CheckpointLayout and
	// MXFP4Backend: whether and how MXFP4 experts are padded.
	checkpointLayout bool
	mxfp4            MXFP4Backend
	// mxfp4Method: quantization_config's quant_method is mxfp4, so vLLM
	// loads the routed experts through Mxfp4MoEMethod, which pads them.
	mxfp4Method bool
}

// resolveFormats picks each tensor kind's format from cfg and opts.
func resolveFormats(cfg *ModelConfig, opts WeightOptions) (formats, []string, error) {
	var notes []string
	f := formats{base: WeightBF16, checkpointLayout: opts.CheckpointLayout, mxfp4: opts.MXFP4Backend}
	if _, _, err := opts.MXFP4Backend.alignments(); err != nil {
		return f, nil, err
	}
	switch strings.ToLower(cfg.TorchDType) {
	case "bfloat16", "bf16":
	case "float16", "half", "fp16":
		f.half = true
		notes = append(notes, "torch_dtype float16: weights sized at 2 B/param, like bf16")
	case "float32", "float", "fp32":
		f.base = WeightF32
	case "":
		notes = append(notes, "torch_dtype is absent: unquantized weights sized as bf16 (2 B/param)")
	default:
		notes = append(notes, fmt.Sprintf("torch_dtype %q is not known: unquantized weights sized as bf16 (2 B/param)", clip(cfg.TorchDType)))
	}
	f.linear, f.expert = f.base, f.base
	switch opts.DType {
	case 0:
	case BF16, F32:
		f.base, f.half = WeightBF16, false
		if opts.DType == F32 {
			f.base = WeightF32
		}
		f.linear, f.expert = f.base, f.base
		notes = append(notes, fmt.Sprintf("weight_dtype %v overrides torch_dtype and quantization_config", opts.DType))
		return f, notes, nil
	case FP8:
		f.base, f.linear, f.expert, f.half = WeightBF16, WeightFP8Block, WeightFP8Block, false
		f.blockOut, f.blockIn, f.expertBOut, f.expertBIn = 128, 128, 128, 128
		notes = append(notes, "weight_dtype fp8: projections sized as fp8 with one f32 scale per 128×128 block; "+
			"embeddings, norms, router and lm_head as bf16")
		return f, notes, nil
	default:
		return f, nil, &OptionError{Option: "weight_dtype", Value: opts.DType.String(), Reason: "must be bf16, f32 or fp8 (or unset)"}
	}
	if q := cfg.Quantization; q != nil {
		switch strings.ToLower(q.Method) {
		case "fp8":
			f.linear, f.expert = WeightFP8Block, WeightFP8Block
			if len(q.WeightBlockSize) == 2 && q.WeightBlockSize[0] > 0 && q.WeightBlockSize[1] > 0 {
				f.blockOut, f.blockIn = q.WeightBlockSize[0], q.WeightBlockSize[1]
				f.expertBOut, f.expertBIn = f.blockOut, f.blockIn
			} else {
				notes = append(notes, "quantization_config fp8 without a 2-entry weight_block_size: one f32 scale per tensor")
			}
		case "mxfp4":
			f.expert, f.mxfp4Method = WeightMXFP4, true
			notes = append(notes, "quantization_config mxfp4: routed expert weights as mxfp4 (4.25 bits/param), "+
				"their biases, attention, router, embeddings and lm_head as "+f.base.String())
		default:
			notes = append(notes, fmt.Sprintf("quant_method %q is not modelled: weights sized as %v (an over-estimate)", clip(q.Method), f.base))
		}
	}
	switch strings.ToLower(cfg.ExpertDType) {
	case "":
	case "fp4", "mxfp4":
		f.expert = WeightMXFP4
		notes = append(notes, "expert_dtype fp4: routed experts as mxfp4 (4-bit values + an e8m0 scale per 32 = 4.25 bits/param), "+
			"as vLLM's DeepseekV4FP8Config loads them")
	case "fp8":
		f.expert, f.expertBOut, f.expertBIn = WeightFP8Block, 128, 128
		notes = append(notes, "expert_dtype fp8: routed experts as fp8 with one f32 scale per 128×128 block")
	default:
		notes = append(notes, fmt.Sprintf("expert_dtype %q is not modelled: experts sized as %v", clip(cfg.ExpertDType), f.expert))
	}
	return f, notes, nil
}

// weightBuilder collects tensors. Its sizer ("weight shape") checks the
// arithmetic of the families' shapes and also keeps the first failure of a
// tensor (an *OverflowError naming "weight <tensor>").
type weightBuilder struct {
	sizer
	cfg     *ModelConfig
	f       formats
	group   string // when set, every tensor's group (the MTP layers: "mtp")
	tensors []WeightTensor
	// origins[i] is how tensors[i] was asked for (CheckpointTensors reads it).
	origins []tensorOrigin
	notes   []string
	// expertPad is the padded expert layout the experts were sized in,
	// for EstimateWeights's note; zero when they were not padded.
	expertPad expertLayout
}

// tensorOrigin is how one WeightTensor was asked for: its kind, the group
// its family named (before the MTP layers' "mtp" override) and, for a
// tensor outside the decoder's naming (a vision tower's), its checkpoint
// name.
type tensorOrigin struct {
	kind  tensorKind
	group string
	// checkpoint is the tensor's full checkpoint name, "*" standing for
	// the block index of a tensor repeated per block
	// ("visual.blocks.*.attn.qkv.weight"); "" for a tensor the family's
	// checkpointNaming names.
	checkpoint string
}

// tensorForm is how a tensor's instances differ from what its kind and
// shape say: the engine's shape and format where it pads or converts them,
// and a checkpoint name of its own. The zero value is none of these.
type tensorForm struct {
	engineShape  []int64      // nil: the checkpoint's shape
	engineFormat WeightFormat // 0: the checkpoint's format
	checkpoint   string       // see tensorOrigin.checkpoint
}

// tensor records count instances (active of them read per token) of a
// tensor of the given shape, stored as kind's format. A count ≤ 0 or a
// zero-sized shape records nothing.
func (w *weightBuilder) tensor(name, group string, kind tensorKind, count, active int64, shape ...int64) {
	w.tensorAs(name, group, kind, count, active, shape, tensorForm{})
}

// tensorAs is tensor with form: the engine's shape and format (which set
// Bytes; CheckpointBytes stays the checkpoint's) and a checkpoint name.
func (w *weightBuilder) tensorAs(name, group string, kind tensorKind, count, active int64, shape []int64, form tensorForm) {
	if w.err != nil || count <= 0 {
		return
	}
	origin := tensorOrigin{kind: kind, group: group, checkpoint: form.checkpoint}
	if w.group != "" {
		group = w.group
	}
	s := sizer{what: "weight " + name}
	per := s.mul(shape...)
	if s.err != nil || per == 0 {
		w.err = s.err
		return
	}
	format := w.format(kind)
	inst, err := w.instanceBytes(s.what, format, kind, shape)
	if err != nil {
		w.err = err
		return
	}
	t := WeightTensor{Name: name, Group: group, Shape: shape, Count: count, ActiveCount: active,
		Format: format, Lookup: kind == kindEmbedding || kind == kindI32}
	engineInst := inst
	if form.engineShape != nil && !slices.Equal(form.engineShape, shape) {
		t.EngineShape = form.engineShape
	}
	if form.engineFormat != 0 && form.engineFormat != format {
		t.EngineFormat = form.engineFormat
	}
	if t.EngineShape != nil || t.EngineFormat != 0 {
		es, ef := shape, format
		if t.EngineShape != nil {
			es = t.EngineShape
		}
		if t.EngineFormat != 0 {
			ef = t.EngineFormat
		}
		if engineInst, err = w.instanceBytes(s.what, ef, kind, es); err != nil {
			w.err = err
			return
		}
	}
	t.Params, t.ActiveParams = s.mul(count, per), s.mul(active, per)
	t.Bytes, t.CheckpointBytes = s.mul(count, engineInst), s.mul(count, inst)
	if s.err != nil {
		w.err = s.err
		return
	}
	w.tensors = append(w.tensors, t)
	w.origins = append(w.origins, origin)
}

// format is the format a tensor of kind is stored in.
func (w *weightBuilder) format(kind tensorKind) WeightFormat {
	switch kind {
	case kindLinear:
		return w.f.linear
	case kindExpert:
		return w.f.expert
	case kindF32:
		return WeightF32
	case kindI32:
		return WeightI32
	default:
		return w.f.base
	}
}

// instanceBytes is one instance's bytes: for a projection [in, out],
// WeightFP8Block adds 4·⌈in/bi⌉·⌈out/bo⌉ scale bytes and WeightMXFP4 is
// out·⌈in/32⌉·17 B.
func (w *weightBuilder) instanceBytes(what string, f WeightFormat, kind tensorKind, shape []int64) (int64, error) {
	switch f {
	case WeightFP8Block, WeightMXFP4:
		if len(shape) != 2 {
			return 0, fmt.Errorf("arena: %s: a %v tensor must be 2-D, got %v", what, f, shape)
		}
		in, out := shape[0], shape[1]
		s := sizer{what: what}
		if f == WeightMXFP4 {
			return s.mul(out, ceilDiv(in, MXFP4BlockSize), MXFP4BlockSize/2+1), s.err
		}
		bo, bi := w.f.blockOut, w.f.blockIn
		if kind == kindExpert {
			bo, bi = w.f.expertBOut, w.f.expertBIn
		}
		if bo <= 0 || bi <= 0 {
			bo, bi = out, in
		}
		return s.add(s.mul(in, out), s.mul(ceilDiv(in, bi), ceilDiv(out, bo), F32.Size())), s.err
	case WeightF32, WeightI32:
		return CheckedProduct(what, append(shape, 4)...)
	default:
		return CheckedProduct(what, append(shape, 2)...)
	}
}
