package arena

import "fmt"

// section is one output section of a fused projection as a weight loader
// splits it over t tensor-parallel ranks: rows of dim 0, each rank taking
// rows / t of them at tp_rank·rows / t, or all of them when replicated.
type section struct {
	rows       int64
	replicated bool
}

// sectionRows is the row ranges tensor-parallel rank tp of t holds of a
// tensor whose dim 0 is secs one after the other
// (vllm/model_executor/layers/mamba/mamba_mixer2.py
// mamba_v2_sharded_weight_loader: each section sliced on its own, by
// shard_size = rows / t at tp_rank, or at rank 0 for the duplicated
// group), adjacent ranges merged. It returns the dim-0 rows secs cover.
// Errors: a *ParallelError naming the tensor when t does not divide a
// split section.
func sectionRows(name string, t, tp int64, secs ...section) ([]RowRange, int64, error) {
	var out []RowRange
	var at int64
	for _, sec := range secs {
		switch {
		case sec.replicated:
			out = appendRows(out, RowRange{at, sec.rows})
		case sec.rows%t != 0:
			return nil, 0, &ParallelError{Option: "tensor_parallel_size", Size: t, Reason: fmt.Sprintf(
				"tensor %s: a section of %d rows (at row %d) does not split into %d equal parts, as vLLM's mamba_v2_sharded_weight_loader requires", clip(name), sec.rows, at, t)}
		default:
			n := sec.rows / t
			out = appendRows(out, RowRange{at + tp*n, n})
		}
		at += sec.rows
	}
	return out, at, nil
}

// appendRows is rs with r appended, merged into the last range when it
// starts where that one ends; an empty r is left out.
func appendRows(rs []RowRange, r RowRange) []RowRange {
	switch {
	case r.Len == 0:
		return rs
	case len(rs) > 0 && rs[len(rs)-1].Start+rs[len(rs)-1].Len == r.Start:
		rs[len(rs)-1].Len += r.Len
		return rs
	}
	return append(rs, r)
}

// gdnRule is the split of a Qwen3-Next Gated DeltaNet tensor,
// model.layers.N.linear_attn.<param>, as vLLM's
// vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py
// QwenGatedDeltaNetAttention (gqa_interleaved_layout, as
// vllm/model_executor/models/qwen3_next.py Qwen3NextDecoderLayer builds
// it) loads it at tensor_parallel_size t; with key_dim = nk·dk and
// value_dim = nv·dv:
//   - in_proj_qkvz [2·key_dim + 2·value_dim, H] and in_proj_ba [2·nv, H]:
//     rows ÷ t, contiguous. Both are a MergedColumnParallelLinear of one
//     output section (create_qkvz_proj, create_ba_proj) because the
//     checkpoint orders their rows by key-head group ([q, k, v, z] of
//     each of the nk groups; [b, a] of each group), so 1/t of the rows
//     is nk/t whole groups (fix_query_key_value_ordering views them so);
//   - conv1d [2·key_dim + value_dim, 1, kernel]: its q, k and v sections
//     ÷ t each (mamba_v2_sharded_weight_loader with key_dim, key_dim,
//     value_dim), three row ranges;
//   - dt_bias and A_log [nv]: ÷ t (sharded_weight_loader(0));
//   - norm [dv], the gated RMSNorm over one head (RMSNormGated of
//     head_v_dim): whole;
//   - out_proj [H, value_dim]: columns ÷ t (RowParallelLinear).
//
// At t = 1 every tensor is whole. Errors: a *ParallelError for another
// tensor, or one checkTensorSplit's divisibility leaves unsplittable.
func (s *sharder) gdnRule(name, param string) (split, error) {
	t, tp := s.l.TensorParallelSize, s.sh.idx.TP
	if t == 1 {
		return split{}, nil
	}
	g := s.cfg.GDN
	switch param {
	case "in_proj_qkvz.weight", "in_proj_ba.weight", "dt_bias", "A_log":
		return split{dim: 0, parts: t, index: tp}, nil
	case "conv1d.weight":
		keyDim, valueDim := g.NumKeyHeads*g.KeyHeadDim, g.NumValueHeads*g.ValueHeadDim
		rows, n, err := sectionRows(name, t, tp, section{rows: keyDim}, section{rows: keyDim}, section{rows: valueDim})
		return split{sections: rows, rows: n}, err
	case "norm.weight":
		return split{}, nil
	case "out_proj.weight":
		return split{dim: 1, parts: t, index: tp}, nil
	}
	return split{}, unlistedMixerTensor(name, "Gated DeltaNet", t)
}

// mambaRule is the split of a Nemotron-H Mamba-2 mixer tensor,
// backbone.layers.N.mixer.<param>, as vLLM's
// vllm/model_executor/layers/mamba/mamba_mixer2.py MambaMixer2 loads it
// at tensor_parallel_size t; with d_inner = nheads·head_dim and the
// groups' width ng·d_state:
//   - in_proj [2·d_inner + 2·ng·d_state + nheads, H], the sections gate,
//     x, B, C and dt: each ÷ t (a MergedColumnParallelLinear of those
//     five output sizes; mamba_v2_sharded_weight_loader before it), five
//     row ranges; with n_groups 1 (the one case vLLM allows where t does
//     not divide n_groups) B and C are whole on every rank
//     (extra_groups_for_head_shards: the group duplicated to follow the
//     head shards);
//   - conv1d weight [d_inner + 2·ng·d_state, 1, kernel] and bias
//     [d_inner + 2·ng·d_state]: the sections x, B and C, as in_proj's;
//   - dt_bias, A_log and D [nheads]: ÷ t (sharded_weight_loader(0); A
//     loads A_log through it);
//   - norm [d_inner], the gated RMSNorm (Mixer2RMSNormGated): ÷ t
//     (sharded_weight_loader(0));
//   - out_proj [H, d_inner]: columns ÷ t (RowParallelLinear).
//
// At t = 1 every tensor is whole. Errors: a *ParallelError for another
// tensor, or one checkTensorSplit's divisibility leaves unsplittable.
func (s *sharder) mambaRule(name, param string) (split, error) {
	t, tp := s.l.TensorParallelSize, s.sh.idx.TP
	if t == 1 {
		return split{}, nil
	}
	m := s.cfg.Mamba
	inner := section{rows: m.DInner}
	groups := section{rows: m.NumGroups * m.StateSize, replicated: m.NumGroups == 1}
	var secs []section
	switch param {
	case "in_proj.weight":
		secs = []section{inner, inner, groups, groups, {rows: m.NumHeads}}
	case "conv1d.weight", "conv1d.bias":
		secs = []section{inner, groups, groups}
	case "dt_bias", "A_log", "D", "norm.weight":
		return split{dim: 0, parts: t, index: tp}, nil
	case "out_proj.weight":
		return split{dim: 1, parts: t, index: tp}, nil
	default:
		return split{}, unlistedMixerTensor(name, "Mamba-2", t)
	}
	rows, n, err := sectionRows(name, t, tp, secs...)
	return split{sections: rows, rows: n}, err
}

// unlistedMixerTensor is the *ParallelError for a mixer tensor whose split
// the mixer's rule does not list.
func unlistedMixerTensor(name, mixer string, t int64) error {
	return &ParallelError{Option: "tensor_parallel_size", Size: t, Reason: fmt.Sprintf(
		"tensor %s: the %s mixer's rule does not list its split over tensor-parallel ranks; use tensor_parallel_size 1", clip(name), mixer)}
}
