package arena

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuarena/gpuarena/checkpoint"
)

// ShardKind is what part of a checkpoint tensor one rank holds.
type ShardKind uint8

const (
	// ShardAbsent: the rank does not hold the tensor (another pipeline
	// stage's layer, another expert-parallel rank's expert).
	ShardAbsent ShardKind = iota
	// ShardWhole: the rank holds the whole tensor (norms, routers, MLA's
	// replicated projections, every tensor at tensor_parallel_size 1).
	ShardWhole
	// ShardRows: the rank holds rows [Start, Start+Len) of dim 0
	// (ColumnParallelLinear, QKVParallelLinear, VocabParallelEmbedding,
	// stacked experts under expert parallelism).
	ShardRows
	// ShardCols: the rank holds columns [Start, Start+Len) of dim 1
	// (RowParallelLinear's input dimension).
	ShardCols
	// ShardSections: the rank holds several disjoint row ranges of dim 0,
	// Sections, back to back: its slice of each section of a fused
	// projection whose sections split over the ranks one by one (Gated
	// DeltaNet's conv1d, Mamba-2's in_proj and conv1d:
	// vllm/model_executor/layers/mamba/mamba_mixer2.py
	// mamba_v2_sharded_weight_loader).
	ShardSections
)

// String is "absent", "whole", "rows", "cols" or "sections".
func (k ShardKind) String() string {
	switch k {
	case ShardAbsent:
		return "absent"
	case ShardWhole:
		return "whole"
	case ShardRows:
		return "rows"
	case ShardCols:
		return "cols"
	case ShardSections:
		return "sections"
	}
	return "ShardKind(" + strconv.Itoa(int(k)) + ")"
}

// ByteRange is Bytes bytes at Offset, in bytes from a tensor's first byte
// in its checkpoint file.
type ByteRange struct {
	Offset, Bytes int64
}

// RowRange is Len rows of a tensor's dim 0 from row Start.
type RowRange struct {
	Start, Len int64
}

// TensorShard is the part of one checkpoint tensor a rank holds.
type TensorShard struct {
	// Name, DType and Shape are the checkpoint's (torch's [out, in] for a
	// linear weight).
	Name  string
	DType checkpoint.DType
	Shape []int64
	// Kind is what the rank holds; Start and Len the slice along dim 0
	// (ShardRows) or dim 1 (ShardCols), in elements of that dimension, 0
	// otherwise.
	Kind       ShardKind
	Start, Len int64
	// Sections are the dim-0 row ranges of a ShardSections shard, in
	// increasing order, none empty, no two adjacent (adjacent ones are
	// merged); nil for the other kinds.
	Sections []RowRange
	// RankShape is the tensor as the rank allocates it: Shape with the
	// split dimension Len (the Sections' rows for ShardSections), or more
	// for a vocabulary shard, whose rank holds padded_vocab / t rows
	// however few real rows its range has (the padding rows are not in
	// the file; the load zero-fills them). Nil when absent.
	RankShape []int64
}

// RankBytes is what the rank allocates for the tensor: RankShape's bytes,
// 0 when absent.
func (s TensorShard) RankBytes() int64 {
	if s.Kind == ShardAbsent {
		return 0
	}
	return shapeBytes(s.DType, s.RankShape)
}

// FileBytes is what the rank reads of the tensor: the sum of ByteRanges.
func (s TensorShard) FileBytes() int64 {
	var n int64
	for _, r := range s.ByteRanges() {
		n += r.Bytes
	}
	return n
}

// ByteRanges is the byte ranges of the file's tensor the rank reads, in
// order; the rank's tensor is their bytes back to back. A whole tensor and
// a dim-0 slice are one range; sections one range each; a dim-1 slice is
// one range per dim-0 row (the file is row-major), adjacent ones merged.
// Nil when absent or empty.
func (s TensorShard) ByteRanges() []ByteRange {
	total := shapeBytes(s.DType, s.Shape)
	switch {
	case s.Kind == ShardAbsent || total == 0:
		return nil
	case s.Kind == ShardWhole:
		return []ByteRange{{0, total}}
	case s.Kind == ShardRows:
		row := total / s.Shape[0]
		if s.Len == 0 {
			return nil
		}
		return []ByteRange{{s.Start * row, s.Len * row}}
	case s.Kind == ShardSections:
		row := total / s.Shape[0]
		out := make([]ByteRange, len(s.Sections))
		for i, r := range s.Sections {
			out[i] = ByteRange{r.Start * row, r.Len * row}
		}
		return out
	}
	rows := s.Shape[0]
	rowBytes := total / rows
	inner := rowBytes / s.Shape[1]
	if s.Len == 0 {
		return nil
	}
	out := make([]ByteRange, 0, rows)
	for r := range rows {
		out = append(out, ByteRange{r*rowBytes + s.Start*inner, s.Len * inner})
	}
	return out
}

// shapeBytes is the bytes of a tensor of dtype d and shape; shapes come
// from CheckpointTensors, already checked against overflow.
func shapeBytes(d checkpoint.DType, shape []int64) int64 {
	n := int64(d.Bits())
	for _, x := range shape {
		n *= x
	}
	return n / 8
}

// RankShards lists, for every tensor of CheckpointTensors(cfg, wopts) in
// its order, the part global rank of layout holds, by vLLM's rules:
//   - pipeline: a decoder layer's tensors on the stage that owns the layer
//     (vllm/distributed/utils.py get_pp_indices), MTP layers on the last;
//     embed_tokens on the first stage (and the last with
//     tie_word_embeddings), the final norm and lm_head on the last; a
//     vision tower and projector whole on the first (counted whole, as
//     PlanRanks counts them);
//   - tensor parallel t (vllm/model_executor/layers/linear.py weight_loader
//     of each class): q_proj, MLA's q_b_proj and kv_b_proj, gate_proj and
//     up_proj (ColumnParallelLinear, MergedColumnParallelLinear) rows ÷ t,
//     their bias too; k_proj and v_proj (QKVParallelLinear) the rows of KV
//     heads max(1, Hkv/t) from head ⌊tp_rank / (t/Hkv)⌋ when t > Hkv
//     (replicated), else Hkv/t heads from tp_rank·Hkv/t; o_proj and
//     down_proj (RowParallelLinear) columns ÷ t, their bias whole; gpt-oss
//     sinks ÷ t; embed_tokens and lm_head (vocab_parallel_embedding.py
//     VocabParallelEmbedding, ParallelLMHead) rows [tp_rank·Vp/t,
//     min((tp_rank+1)·Vp/t, V)) of the vocabulary padded to Vp, a multiple
//     of 64, each rank allocating Vp/t rows; every norm, router, MLA
//     q_a_proj and kv_a_proj_with_mqa and Qwen2-MoE's shared_expert_gate
//     whole; FP8 weight_scale_inv sliced as its weight, in blocks (each
//     section's blocks for sections);
//   - Gated DeltaNet and Mamba-2 mixers: the rules of gdnRule and
//     mambaRule (rank_shards_mixers.go, from vLLM's
//     QwenGatedDeltaNetAttention and MambaMixer2 weight loaders);
//   - routed experts (vllm/model_executor/layers/fused_moe/layer.py
//     determine_expert_map, linear placement): with expert parallelism
//     expert e on EP rank r of the t·d when r·⌊E/(t·d)⌋ + min(r, E mod
//     t·d) ≤ e < that + its count, whole (stacked experts: their dim-0
//     rows); without, every expert's gate/up rows and down columns ÷ t·d
//     at EP rank; shared experts ÷ t.
//
// With t = p = d = 1 every tensor is whole. Errors: those of PlanRanks'
// checks (an *OptionError, a *ParallelError) and of CheckpointTensors; an
// *OptionError for a rank outside [0, GPUs); a *ParallelError
// (ErrParallelLayout) naming the tensor for a split the checkpoint's
// shapes do not divide or whose rule is not modelled (MTP's extra
// projections, stacked experts without expert parallelism under t·d > 1,
// a mixer tensor gdnRule or mambaRule does not list).
func RankShards(cfg *ModelConfig, wopts WeightOptions, layout ParallelLayout, rank int64) ([]TensorShard, error) {
	if cfg == nil {
		return nil, &ConfigError{Reason: "nil *ModelConfig"}
	}
	if err := cfg.checkSizes(); err != nil {
		return nil, err
	}
	l, err := layout.resolved()
	if err != nil {
		return nil, err
	}
	if rank < 0 || rank >= l.GPUs() {
		return nil, &OptionError{Option: "rank", Value: rank, Reason: fmt.Sprintf("the layout %s has ranks [0, %d)", l, l.GPUs())}
	}
	_, sh, err := rankConfig(cfg, l, l.rankIndex(rank))
	if err != nil {
		return nil, err
	}
	tensors, err := CheckpointTensors(cfg, wopts)
	if err != nil {
		return nil, err
	}
	f, _, err := resolveFormats(cfg, wopts)
	if err != nil {
		return nil, err
	}
	spec, _, err := shapeOf(cfg)
	if err != nil {
		return nil, err
	}
	naming, _ := spec.(checkpointNamer).checkpointNames(cfg) // CheckpointTensors checked both
	s := sharder{cfg: cfg, l: l, sh: sh, naming: naming, f: f, weights: map[string]TensorShard{}}
	out := make([]TensorShard, len(tensors))
	for i, t := range tensors {
		if out[i], err = s.shard(t); err != nil {
			return nil, err
		}
		s.weights[t.Name] = out[i]
	}
	return out, nil
}

// sharder applies RankShards' rules for one rank.
type sharder struct {
	cfg    *ModelConfig
	l      ParallelLayout
	sh     rankShare
	naming checkpointNaming
	f      formats
	// weights is the shards listed so far, for a weight_scale_inv's weight.
	weights map[string]TensorShard
}

// split is a rule: the tensor's dim split in parts equal parts, this rank
// holding part index; or, with experts, the rank's routed experts
// [first, first+count) of a stacked tensor's dim 0; or, with sections,
// the rank's row ranges of a dim 0 of rows rows.
type split struct {
	dim          int
	parts, index int64
	experts      bool
	first, count int64
	sections     []RowRange
	rows         int64
}

// shard is the rank's part of t.
func (s *sharder) shard(t checkpoint.TensorSpec) (TensorShard, error) {
	ts := TensorShard{Name: t.Name, DType: t.DType, Shape: t.Shape}
	if base, ok := strings.CutSuffix(t.Name, ".weight_scale_inv"); ok {
		return s.scale(ts, s.weights[base+".weight"], strings.Contains(base, ".experts."))
	}
	on, sp, vocab, err := s.rule(t.Name)
	switch {
	case err != nil:
		return ts, err
	case !on:
		return ts, nil
	case vocab && s.l.TensorParallelSize > 1:
		return s.vocab(ts), nil
	case sp.experts && sp.count == t.Shape[0]:
		ts.Kind, ts.RankShape = ShardWhole, t.Shape
		return ts, nil
	case sp.experts:
		ts.Kind, ts.Start, ts.Len = ShardRows, sp.first, sp.count
		ts.RankShape = append([]int64{sp.count}, t.Shape[1:]...)
		return ts, nil
	case sp.sections != nil:
		return s.sectioned(ts, sp)
	case sp.parts <= 1:
		ts.Kind, ts.RankShape = ShardWhole, t.Shape
		return ts, nil
	}
	return s.slice(ts, sp)
}

// slice is ts cut by sp. Errors: a *ParallelError when the dimension is
// missing or sp.parts does not divide it.
func (s *sharder) slice(ts TensorShard, sp split) (TensorShard, error) {
	if sp.dim >= len(ts.Shape) || ts.Shape[sp.dim]%sp.parts != 0 {
		return ts, &ParallelError{Option: "tensor_parallel_size", Size: s.l.TensorParallelSize, Reason: fmt.Sprintf(
			"tensor %s %v: dim %d does not split into %d equal parts, as vLLM's weight_loader requires", clip(ts.Name), ts.Shape, sp.dim, sp.parts)}
	}
	n := ts.Shape[sp.dim] / sp.parts
	ts.Kind, ts.Start, ts.Len = ShardRows, sp.index*n, n
	if sp.dim == 1 {
		ts.Kind = ShardCols
	}
	ts.RankShape = append([]int64(nil), ts.Shape...)
	ts.RankShape[sp.dim] = n
	return ts, nil
}

// sectioned is ts cut into sp's row ranges: ShardRows when they are one
// range, else ShardSections. Errors: a *ParallelError when ts's dim 0 is
// not the rows the sections were cut from (a listing the rule does not
// match).
func (s *sharder) sectioned(ts TensorShard, sp split) (TensorShard, error) {
	if len(ts.Shape) == 0 || ts.Shape[0] != sp.rows {
		return ts, &ParallelError{Option: "tensor_parallel_size", Size: s.l.TensorParallelSize, Reason: fmt.Sprintf(
			"tensor %s %v: its sections cover %d rows of dim 0", clip(ts.Name), ts.Shape, sp.rows)}
	}
	var n int64
	for _, r := range sp.sections {
		n += r.Len
	}
	ts.RankShape = append([]int64(nil), ts.Shape...)
	ts.RankShape[0] = n
	if len(sp.sections) == 1 {
		ts.Kind, ts.Start, ts.Len = ShardRows, sp.sections[0].Start, sp.sections[0].Len
		return ts, nil
	}
	ts.Kind, ts.Sections = ShardSections, sp.sections
	return ts, nil
}

// vocab is ts's VocabParallelEmbedding shard: the real rows of
// [tp·Vp/t, (tp+1)·Vp/t), Vp/t rows allocated
// (vocab_parallel_embedding.py pad_vocab_size,
// vocab_range_from_global_vocab_size).
func (s *sharder) vocab(ts TensorShard) TensorShard {
	v := ts.Shape[0]
	per := ceilDiv(v, vocabPadding) * vocabPadding / s.l.TensorParallelSize
	start := s.sh.idx.TP * per
	ts.Kind, ts.Start, ts.Len = ShardRows, min(start, v), max(0, min(start+per, v)-start)
	ts.RankShape = append([]int64(nil), ts.Shape...)
	ts.RankShape[0] = per
	return ts
}

// scale is the FP8 weight_scale_inv ts of weight w: absent or whole as w,
// else w's slice (each of its sections) in blocks of the format's block
// size (expert: the experts' blocks). Errors: a *ParallelError when a
// slice does not start on a block or ends inside one before the tensor's
// end, as vLLM's Fp8LinearMethod.create_weights requires.
func (s *sharder) scale(ts TensorShard, w TensorShard, expert bool) (TensorShard, error) {
	switch w.Kind {
	case ShardAbsent:
		return ts, nil
	case ShardWhole:
		ts.Kind, ts.RankShape = ShardWhole, ts.Shape
		return ts, nil
	}
	dim := 0
	b := s.f.blockOut
	if expert {
		b = s.f.expertBOut
	}
	if w.Kind == ShardCols {
		dim, b = 1, s.f.blockIn
		if expert {
			b = s.f.expertBIn
		}
	}
	if b <= 0 || len(ts.Shape) != 2 {
		ts.Kind, ts.RankShape = ShardWhole, ts.Shape
		return ts, nil
	}
	parts := []RowRange{{w.Start, w.Len}}
	if w.Kind == ShardSections {
		parts = w.Sections
	}
	var blocks []RowRange
	for _, r := range parts {
		if r.Start%b != 0 || (r.Len%b != 0 && r.Start+r.Len != w.Shape[dim]) {
			return ts, &ParallelError{Option: "tensor_parallel_size", Size: s.l.TensorParallelSize, Reason: fmt.Sprintf(
				"tensor %s: its weight's slice [%d, +%d) of dim %d does not fall on FP8 blocks of %d; vLLM requires the rank's width to be a multiple of weight_block_size",
				clip(ts.Name), r.Start, r.Len, dim, b)}
		}
		blocks = appendRows(blocks, RowRange{r.Start / b, ceilDiv(r.Start+r.Len, b) - r.Start/b})
	}
	ts.RankShape = append([]int64(nil), ts.Shape...)
	ts.RankShape[dim] = 0
	for _, r := range blocks {
		ts.RankShape[dim] += r.Len
	}
	switch {
	case len(blocks) > 1:
		ts.Kind, ts.Sections = ShardSections, blocks
	case w.Kind == ShardSections:
		ts.Kind, ts.Start, ts.Len = ShardRows, blocks[0].Start, blocks[0].Len
	default:
		ts.Kind, ts.Start, ts.Len = w.Kind, blocks[0].Start, blocks[0].Len
	}
	return ts, nil
}

// rule classifies name: on, whether the rank holds it; sp, how it splits
// (parts ≤ 1: whole); vocab, an embedding or LM head row-split by
// vocabulary. Errors: a *ParallelError for a role whose split is not
// modelled, only when it would be split.
func (s *sharder) rule(name string) (on bool, sp split, vocab bool, err error) {
	n := s.naming
	t, tp := s.l.TensorParallelSize, s.sh.idx.TP
	switch name {
	case n.root + "." + n.embed + ".weight":
		return s.sh.first || (s.cfg.TieWordEmbeddings && s.sh.last), split{}, true, nil
	case n.lmHead + ".weight":
		return s.sh.last, split{}, true, nil
	case n.root + "." + n.finalNorm + ".weight":
		return s.sh.last, split{}, false, nil
	}
	rest, ok := strings.CutPrefix(name, n.root+".layers.")
	if !ok {
		return s.sh.first, split{}, false, nil // vision tower and projector
	}
	num, role, _ := strings.Cut(rest, ".")
	li, _ := strconv.ParseInt(num, 10, 64)
	if li < int64(len(s.cfg.Layers)) {
		on = s.sh.start <= li && li < s.sh.end
	} else {
		on = s.sh.last // MTP layers (DeepSeek-V3 layout)
	}
	if !on {
		return false, split{}, false, nil
	}
	if li < int64(len(s.cfg.Layers)) {
		switch m := s.cfg.Layers[li].Mixer; {
		case m == MixerGDN && strings.HasPrefix(role, "linear_attn."):
			sp, err := s.gdnRule(name, strings.TrimPrefix(role, "linear_attn."))
			return true, sp, false, err
		case m == MixerMamba2 && strings.HasPrefix(role, "mixer."):
			sp, err := s.mambaRule(name, strings.TrimPrefix(role, "mixer."))
			return true, sp, false, err
		}
	}
	cols, rows := split{dim: 1, parts: t, index: tp}, split{dim: 0, parts: t, index: tp}
	leaf := role[strings.LastIndexByte(role, '.')+1:]
	module := strings.TrimSuffix(strings.TrimSuffix(role, "."+leaf), ".weight")
	proj := module[strings.LastIndexByte(module, '.')+1:]
	if strings.HasPrefix(role, n.moe+".experts.") {
		on, sp := s.expertRule(role, proj)
		return on, sp, false, s.expertErr(role)
	}
	switch {
	case strings.Contains(proj, "norm"), proj == n.router, proj == "shared_expert_gate", leaf == "e_score_correction_bias",
		proj == "q_a_proj", proj == "kv_a_proj_with_mqa":
		return true, split{}, false, nil
	case proj == "q_proj" || proj == "q_b_proj" || proj == "kv_b_proj" || proj == "gate_proj" || proj == "up_proj" || leaf == "sinks":
		return true, rows, false, nil
	case proj == "k_proj" || proj == "v_proj":
		kv := s.cfg.NumKVHeads
		if t > kv {
			return true, split{dim: 0, parts: kv, index: tp / (t / kv)}, false, nil
		}
		return true, rows, false, nil
	case proj == "o_proj" || proj == "down_proj":
		if leaf == "bias" {
			return true, split{}, false, nil
		}
		return true, cols, false, nil
	}
	if t > 1 {
		return true, split{}, false, &ParallelError{Option: "tensor_parallel_size", Size: t, Reason: fmt.Sprintf(
			"tensor %s: its split over tensor-parallel ranks is not modelled; use tensor_parallel_size 1", clip(name))}
	}
	return true, split{}, false, nil
}

// expertRule is a routed expert tensor's split under role
// "<moe>.experts.<e>.<proj>..." or, stacked, "<moe>.experts.<proj>": with
// expert parallelism the rank's experts (on is false for another rank's
// expert; a stacked tensor's rows of them), else gate/up rows and down
// columns ÷ t·d at the EP rank (FusedMoE folds DP into TP without EP).
func (s *sharder) expertRule(role, proj string) (on bool, sp split) {
	e, stacked := s.expertIndex(role)
	if s.l.EnableExpertParallel {
		first := s.firstExpert()
		if stacked {
			return true, split{experts: true, first: first, count: s.sh.experts}
		}
		return first <= e && e < first+s.sh.experts, split{}
	}
	if stacked {
		return true, split{}
	}
	ranks := s.l.TensorParallelSize * s.l.DataParallelSize
	if proj == "down_proj" || proj == s.naming.experts["down_proj"] {
		return true, split{dim: 1, parts: ranks, index: s.sh.idx.EP}
	}
	return true, split{dim: 0, parts: ranks, index: s.sh.idx.EP}
}

// expertErr is the *ParallelError for stacked experts split by width
// (t·d > 1 without expert parallelism), whose interleaved gate_up layout
// is not modelled; nil otherwise.
func (s *sharder) expertErr(role string) error {
	if _, stacked := s.expertIndex(role); !stacked || s.l.EnableExpertParallel || s.l.TensorParallelSize*s.l.DataParallelSize == 1 {
		return nil
	}
	return &ParallelError{Option: "tensor_parallel_size", Size: s.l.TensorParallelSize, Reason: fmt.Sprintf(
		"stacked experts %s: splitting their width over ranks is not modelled; use enable_expert_parallel", clip(role))}
}

// expertIndex is the expert number in role, or stacked when role is a
// layer's stacked experts (GptOssExperts).
func (s *sharder) expertIndex(role string) (e int64, stacked bool) {
	rest := strings.TrimPrefix(role, s.naming.moe+".experts.")
	num, _, _ := strings.Cut(rest, ".")
	e, err := strconv.ParseInt(num, 10, 64)
	return e, err != nil
}

// firstExpert is the first routed expert of the rank's EP rank r of the
// t·d: r·⌊E/(t·d)⌋ + min(r, E mod t·d) (determine_expert_map, linear).
func (s *sharder) firstExpert() int64 {
	size := s.l.TensorParallelSize * s.l.DataParallelSize
	r := s.sh.idx.EP
	return r*(s.cfg.NumExperts/size) + min(r, s.cfg.NumExperts%size)
}
