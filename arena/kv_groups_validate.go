package arena

import (
	"fmt"
	"slices"
)

// Validate checks that s adds up, with overflow-checked arithmetic, before
// anything is allocated for it: a kv_block_size > 0; at least one group;
// group names non-empty and distinct; per group Blocks > 0, BlockTokens
// the spec's (paged) or 0 (state), at least one layer, layer indices ≥ 0
// and increasing, each layer at the offset where the one before ends, of
// max(Planes, 1) × Blocks × BlockStride bytes, with strides that agree
// (EntriesPerBlock = ⌈BlockTokens / CompressRatio⌉, BlockStride =
// EntriesPerBlock × EntryStride, EntryStride = Heads × HeadStride,
// HeadStride = HeadDim × ElementBytes, PlaneStride = Blocks × BlockStride
// for K and V; a state slot = ConvBytes + SSMBytes, each its shape's
// elements × element bytes, or a whole compressor state), the group's
// Bytes their sum; and s.Bytes the groups' sum. Errors: a *KVCacheError
// naming the field (errors.Is ErrKVCacheSpec); an *OverflowError.
func (s *KVCacheSpec) Validate() error {
	if s == nil {
		return &KVCacheError{Field: "spec", Reason: "nil *KVCacheSpec: build one with NewKVCacheSpec"}
	}
	if s.BlockTokens <= 0 {
		return &KVCacheError{Field: "block_tokens", Asked: s.BlockTokens, Reason: "must be positive"}
	}
	if len(s.Groups) == 0 {
		return &KVCacheError{Field: "groups", Reason: "a kv cache has at least one group"}
	}
	var total int64
	var err error
	names := make([]string, 0, len(s.Groups))
	for gi := range s.Groups {
		g := &s.Groups[gi]
		at := fmt.Sprintf("groups[%d]", gi)
		if g.Name == "" || slices.Contains(names, g.Name) {
			return &KVCacheError{Field: at + ".name", Reason: fmt.Sprintf("%q: names must be non-empty and distinct", clip(g.Name))}
		}
		names = append(names, g.Name)
		if err := g.validate(at, s.BlockTokens); err != nil {
			return err
		}
		if total, err = CheckedAdd("kv cache bytes", total, g.Bytes); err != nil {
			return err
		}
	}
	if total != s.Bytes {
		return &KVCacheError{Field: "bytes", Asked: s.Bytes, Available: total, Reason: "is not the sum of the groups' bytes"}
	}
	return nil
}

// validate checks one group of a spec of blocks of blockTokens tokens, at
// names it in errors.
func (g *KVCacheGroup) validate(at string, blockTokens int64) error {
	if g.Blocks <= 0 {
		return &KVCacheError{Field: at + ".blocks", Asked: g.Blocks, Reason: "must be positive"}
	}
	if g.BlockTokens != 0 && g.BlockTokens != blockTokens {
		return &KVCacheError{Field: at + ".block_tokens", Asked: g.BlockTokens, Available: blockTokens, Reason: "a paged group's blocks are the spec's, a state group's 0"}
	}
	if len(g.Layers) == 0 {
		return &KVCacheError{Field: at + ".layers", Reason: "a group covers at least one layer"}
	}
	var off int64
	prev := int64(-1)
	for li := range g.Layers {
		l := &g.Layers[li]
		lat := fmt.Sprintf("%s.layers[%d]", at, li)
		if l.Layer <= prev {
			return &KVCacheError{Field: lat + ".layer", Asked: l.Layer, Available: prev, Reason: "layer indices must be ≥ 0 and increasing"}
		}
		prev = l.Layer
		if l.Offset != off {
			return &KVCacheError{Field: lat + ".offset", Asked: l.Offset, Available: off, Reason: "a layer starts where the one before ends"}
		}
		if err := l.validate(lat, g); err != nil {
			return err
		}
		var err error
		if off, err = CheckedAdd("kv cache group bytes", off, l.Bytes); err != nil {
			return err
		}
	}
	if off != g.Bytes {
		return &KVCacheError{Field: at + ".bytes", Asked: g.Bytes, Available: off, Reason: "is not the sum of the layers' bytes"}
	}
	return nil
}

// validate checks one layer of g, at names it.
func (l *KVCacheLayer) validate(at string, g *KVCacheGroup) error {
	s, blocks := sizer{what: "kv cache layer " + at}, g.Blocks
	var stride, plane int64
	switch l.Planes {
	case 1, 2:
		if l.EntriesPerBlock <= 0 || l.CompressRatio <= 0 || l.Heads <= 0 || l.HeadDim <= 0 || l.ElementBytes <= 0 {
			return &KVCacheError{Field: at, Reason: "entries_per_block, compress_ratio, heads, head_dim and element_bytes must be positive"}
		}
		if want := ceilDiv(g.BlockTokens, l.CompressRatio); g.BlockTokens <= 0 || l.EntriesPerBlock != want {
			return &KVCacheError{Field: at + ".entries_per_block", Asked: l.EntriesPerBlock, Available: want,
				Reason: "a paged layer's block holds ⌈block_tokens / compress_ratio⌉ entries"}
		}
		head := s.mul(l.HeadDim, l.ElementBytes)
		entry := s.mul(l.Heads, head)
		stride = s.mul(l.EntriesPerBlock, entry)
		if l.Planes == 2 {
			plane = s.mul(blocks, stride)
		}
		if s.err == nil && (head != l.HeadStride || entry != l.EntryStride) {
			return &KVCacheError{Field: at + ".entry_stride", Asked: l.EntryStride, Available: entry, Reason: "must be heads × head_dim × element_bytes"}
		}
	case 0:
		if g.BlockTokens != 0 {
			return &KVCacheError{Field: at, Asked: g.BlockTokens, Reason: "a state layer's group has no block_tokens"}
		}
		if slices.ContainsFunc(l.ConvShape, negative) || slices.ContainsFunc(l.SSMShape, negative) || l.ElementBytes < 0 || l.SSMElementBytes < 0 {
			return &KVCacheError{Field: at + ".conv_shape", Reason: "state shapes and element bytes must not be negative"}
		}
		conv := stateBytes(&s, l.ConvShape, l.ElementBytes)
		ssm := stateBytes(&s, l.SSMShape, l.SSMElementBytes)
		if s.err == nil && (conv != l.ConvBytes || ssm != l.SSMBytes) {
			return &KVCacheError{Field: at + ".conv_bytes", Asked: l.ConvBytes + l.SSMBytes, Available: conv + ssm, Reason: "the state's bytes must be its shapes' elements × element bytes"}
		}
		stride = s.add(conv, ssm)
		if stride == 0 {
			stride = l.BlockStride // a compressor state: opaque
		}
	default:
		return &KVCacheError{Field: at + ".planes", Asked: l.Planes, Reason: "must be 2 (K and V), 1 (a latent) or 0 (state)"}
	}
	bytes := s.mul(max(l.Planes, 1), blocks, stride)
	if s.err != nil {
		return s.err
	}
	switch {
	case stride <= 0 || stride != l.BlockStride:
		return &KVCacheError{Field: at + ".block_stride", Asked: l.BlockStride, Available: stride, Reason: "must be positive and agree with the entry or state bytes"}
	case plane != l.PlaneStride:
		return &KVCacheError{Field: at + ".plane_stride", Asked: l.PlaneStride, Available: plane, Reason: "must be blocks × block_stride for K and V, else 0"}
	case bytes != l.Bytes:
		return &KVCacheError{Field: at + ".bytes", Asked: l.Bytes, Available: bytes, Reason: "must be max(planes, 1) × blocks × block_stride"}
	}
	return nil
}

// negative reports whether n < 0.
func negative(n int64) bool { return n < 0 }

// stateBytes is shape's elements × elem bytes, 0 for no shape.
func stateBytes(s *sizer, shape []int64, elem int64) int64 {
	if len(shape) == 0 {
		return 0
	}
	return s.mul(s.mul(shape...), elem)
}
