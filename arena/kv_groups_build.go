package arena

import (
	"fmt"
	"slices"
)

// layersByMixer is each mixer kind's layer indices, in model order.
func layersByMixer(cfg *ModelConfig) map[MixerKind][]int64 {
	m := map[MixerKind][]int64{}
	for i, l := range cfg.Layers {
		m[l.Mixer] = append(m[l.Mixer], int64(i))
	}
	return m
}

// groupBuilder is KVCacheGroups' groups under construction; the first error
// (sizer.err) stops it.
type groupBuilder struct {
	sizer
	cfg    *ModelConfig
	layout KVLayout
	counts KVCacheCounts
	// layers is each mixer kind's layers not yet taken (take).
	layers map[MixerKind][]int64
	groups []KVCacheGroup
	// used records which counts a group took, for unused.
	usedBlocks, usedSliding, usedSlots bool
}

// fail records err unless an error is already recorded.
func (b *groupBuilder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// mismatch records a *KVCacheError wrapping ErrKVCacheMismatch.
func (b *groupBuilder) mismatch(field string, asked, available int64, reason string) {
	b.fail(&KVCacheError{Field: field, Asked: asked, Available: available, Reason: reason, Mismatch: true})
}

// count checks that a kind the model has got a positive count.
func (b *groupBuilder) count(field string, n int64) bool {
	if n <= 0 {
		b.fail(&KVCacheError{Field: field, Asked: n, Reason: "must be positive: the model caches this kind"})
		return false
	}
	return true
}

// kvElementBytes is the KV cache's element size for total bytes of units
// elements: layout.KVElementBytes (kv_cache_dtype) when the layout states
// it, which must then price units at total exactly, else elementBytes.
func (b *groupBuilder) kvElementBytes(field string, total, units int64) int64 {
	if e := b.layout.KVElementBytes; e > 0 {
		if b.mul(units, e) != total {
			b.mismatch(field, total, b.mul(units, e), fmt.Sprintf("%d elements of %d B do not make the layout's bytes: the layout is another model's", units, e))
			return 0
		}
		return e
	}
	return b.elementBytes(field, total, units)
}

// elementBytes is total / units, the bytes of one element, when units
// divides total; otherwise it records a mismatch naming field.
func (b *groupBuilder) elementBytes(field string, total, units int64) int64 {
	if units <= 0 || total <= 0 || total%units != 0 {
		b.mismatch(field, total, units, fmt.Sprintf("%d B is not a whole number of elements of the %d this model's dimensions give: the layout is another model's", total, units))
		return 0
	}
	return total / units
}

// take is the next n layers of kind from b.layers, consumed in order (the
// paged entries and the state kinds each take theirs); a shortfall records
// a mismatch.
func (b *groupBuilder) take(kind MixerKind, n int64) []int64 {
	list := b.layers[kind]
	if n < 0 || int64(len(list)) < n {
		b.mismatch("layers", n, int64(len(list)), fmt.Sprintf("the cache has more %s layers than the model", kind))
		return nil
	}
	b.layers[kind] = list[n:]
	return list[:n]
}

// addGroup appends g, its layers' Offset and Bytes filled here, checking
// that they sum to perBlock bytes per block.
func (b *groupBuilder) addGroup(g KVCacheGroup, perBlock int64) {
	var sum, off int64
	for i := range g.Layers {
		l := &g.Layers[i]
		l.Offset = off
		l.Bytes = b.mul(max(l.Planes, 1), g.Blocks, l.BlockStride)
		off = b.add(off, l.Bytes)
		sum = b.add(sum, b.mul(max(l.Planes, 1), l.BlockStride))
	}
	g.Bytes = off
	if b.err == nil && sum != perBlock {
		b.mismatch(g.Name, sum, perBlock, "the layers' bytes per block differ from the layout's")
	}
	if b.err == nil {
		b.groups = append(b.groups, g)
	}
}

// paged builds the paged group: every paged layer, blocks of kv_block_size
// tokens (⌈kv_block_size/ratio⌉ entries for a compressed layer).
func (b *groupBuilder) paged(entries []kvLayers) {
	l := b.layout
	var layers, units int64
	for _, e := range entries {
		layers = b.add(layers, e.layers)
		units = b.add(units, b.mul(ceilDiv(l.BlockTokens, e.ratio), e.layers, e.width))
	}
	if layers != l.PagedLayers {
		b.mismatch("paged_layers", l.PagedLayers, layers, "the layout's paged layers are not this model's")
		return
	}
	if l.BytesPerBlock == 0 || b.err != nil {
		return
	}
	b.usedBlocks = true
	if !b.count("blocks", b.counts.Blocks) {
		return
	}
	elem := b.kvElementBytes("bytes_per_block", l.BytesPerBlock, units)
	g := KVCacheGroup{Name: KVGroupMLA, BlockTokens: l.BlockTokens, Blocks: b.counts.Blocks}
	for _, e := range entries {
		kind := MixerFullAttention
		if e.ratio > 1 {
			kind, g.Name = MixerCompressedAttention, KVGroupCompressed
		} else if e.kvHeads > 0 && g.Name == KVGroupMLA {
			g.Name = KVGroupFullAttention
		}
		for _, i := range b.take(kind, e.layers) {
			g.Layers = append(g.Layers, b.attentionLayer(i, e, ceilDiv(l.BlockTokens, e.ratio), elem, g.Blocks))
		}
	}
	b.addGroup(g, l.BytesPerBlock)
}

// attentionLayer is layer i of e, entries per block, elem bytes per
// element, in a group of blocks blocks.
func (b *groupBuilder) attentionLayer(i int64, e kvLayers, entries, elem, blocks int64) KVCacheLayer {
	planes, heads, dim := int64(1), int64(1), e.width
	if e.kvHeads > 0 {
		planes, heads = 2, e.kvHeads
		if kv := b.mul(2, heads); kv > 0 && e.width%kv == 0 {
			dim = e.width / kv
		} else {
			b.mismatch("kv_heads", heads, e.width, "K and V of that many heads do not split the cached width evenly")
		}
	}
	head := b.mul(dim, elem)
	entry := b.mul(heads, head)
	l := KVCacheLayer{Layer: i, Planes: planes, BlockStride: b.mul(entries, entry), EntriesPerBlock: entries,
		CompressRatio: e.ratio, EntryStride: entry, Heads: heads, HeadDim: dim, HeadStride: head, ElementBytes: elem}
	if planes == 2 {
		l.PlaneStride = b.mul(blocks, l.BlockStride)
	}
	return l
}

// sliding builds the sliding-window group, when the layout prices one (a
// window and sliding layers: KVLayout.SeqBlocks).
func (b *groupBuilder) sliding(kv kvShape) {
	l, s := b.layout, kv.sliding
	if s.layers != l.SlidingLayers {
		b.mismatch("sliding_layers", l.SlidingLayers, s.layers, "the layout's sliding-window layers are not this model's")
		return
	}
	if l.SlidingBytesPerBlock == 0 || l.SlidingWindow <= 0 || b.err != nil {
		return
	}
	b.usedSliding = true
	if !b.count("sliding_blocks", b.counts.SlidingBlocks) {
		return
	}
	elem := b.kvElementBytes("sliding_bytes_per_token", l.SlidingBytesPerToken, b.mul(s.layers, s.width))
	// Every layer keeping a window: the sliding ones, and the compressed
	// ones (DeepSeek-V4 keeps a window next to its compressed history).
	window := mergeSorted(b.cfgLayers(MixerSlidingAttention), b.cfgLayers(MixerCompressedAttention))
	if int64(len(window)) != s.layers {
		b.mismatch("sliding_layers", s.layers, int64(len(window)), "the model's sliding and compressed layers are not the layout's sliding layers")
		return
	}
	g := KVCacheGroup{Name: KVGroupSlidingWindow, BlockTokens: l.BlockTokens, Blocks: b.counts.SlidingBlocks, Window: l.SlidingWindow}
	for _, i := range window {
		g.Layers = append(g.Layers, b.attentionLayer(i, s, l.BlockTokens, elem, g.Blocks))
	}
	b.addGroup(g, l.SlidingBytesPerBlock)
}

// mergeSorted merges two ascending lists into a new ascending one.
func mergeSorted(a, c []int64) []int64 {
	out := make([]int64, 0, len(a)+len(c))
	for len(a) > 0 && len(c) > 0 {
		if a[0] < c[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, c = append(out, c[0]), c[1:]
		}
	}
	return append(append(out, a...), c...)
}

// stateDims is one recurrent kind's group name, mixer, layer count and
// per-layer state shapes: conv [kernel − 1, conv_dim] and SSM.
type stateDims struct {
	name      string
	kind      MixerKind
	layers    int64
	conv, ssm []int64
}

// state builds the GDN and Mamba-2 state groups: one slot per sequence.
func (b *groupBuilder) state(shape modelShape) {
	var kinds []stateDims
	if g := shape.gdn; g != nil && b.cfg.Counts.GDN > 0 {
		kinds = append(kinds, stateDims{name: KVGroupGDNState, kind: MixerGDN, layers: b.cfg.Counts.GDN,
			conv: []int64{max(g.ConvKernel-1, 0), g.convDim(&b.sizer)}, ssm: []int64{g.NumValueHeads, g.ValueHeadDim, g.KeyHeadDim}})
	}
	if m := shape.mamba; m != nil && b.cfg.Counts.Mamba2 > 0 {
		kinds = append(kinds, stateDims{name: KVGroupMamba2State, kind: MixerMamba2, layers: b.cfg.Counts.Mamba2,
			conv: []int64{max(m.ConvKernel-1, 0), m.convDim(&b.sizer)}, ssm: []int64{m.NumHeads, m.HeadDim, m.StateSize}})
	}
	l := b.layout
	var layers, convUnits, ssmUnits int64
	for _, k := range kinds {
		layers = b.add(layers, k.layers)
		convUnits = b.add(convUnits, b.mul(k.layers, b.mul(k.conv...)))
		ssmUnits = b.add(ssmUnits, b.mul(k.layers, b.mul(k.ssm...)))
	}
	if layers != l.StateLayers {
		b.mismatch("state_layers", l.StateLayers, layers, "the layout's GDN and Mamba-2 layers are not this model's")
		return
	}
	if layers == 0 || b.err != nil {
		return
	}
	b.usedSlots = true
	if !b.count("slots", b.counts.Slots) {
		return
	}
	var convElem, ssmElem int64
	if convUnits > 0 || l.ConvStateBytesPerSeq > 0 {
		convElem = b.elementBytes("conv_state_bytes_per_seq", l.ConvStateBytesPerSeq, convUnits)
	}
	if ssmUnits > 0 || l.SSMStateBytesPerSeq > 0 {
		ssmElem = b.elementBytes("ssm_state_bytes_per_seq", l.SSMStateBytesPerSeq, ssmUnits)
	}
	for _, k := range kinds {
		g := KVCacheGroup{Name: k.name, Blocks: b.counts.Slots}
		var perSlot int64
		for _, i := range b.take(k.kind, k.layers) {
			conv, ssm := b.mul(b.mul(k.conv...), convElem), b.mul(b.mul(k.ssm...), ssmElem)
			stride := b.add(conv, ssm)
			perSlot = b.add(perSlot, stride)
			g.Layers = append(g.Layers, KVCacheLayer{Layer: i, BlockStride: stride, ElementBytes: convElem,
				ConvShape: slices.Clone(k.conv), ConvBytes: conv, SSMShape: slices.Clone(k.ssm), SSMElementBytes: ssmElem, SSMBytes: ssm})
		}
		b.addGroup(g, perSlot)
	}
}

// compressor builds the compressor-state group: the compressed layers'
// per-sequence state (DeepSeek-V4), one slot per sequence.
func (b *groupBuilder) compressor(entries []kvLayers) {
	l := b.layout
	var total int64
	var layers []KVCacheLayer
	compressed := b.cfgLayers(MixerCompressedAttention)
	for _, e := range entries {
		if e.state == 0 {
			continue
		}
		total = b.add(total, b.mul(e.layers, e.state))
		for range e.layers {
			if len(compressed) == 0 {
				b.mismatch("compressor_layers", e.layers, 0, "the cache has more compressor states than the model has compressed layers")
				return
			}
			layers = append(layers, KVCacheLayer{Layer: compressed[0], BlockStride: e.state, ElementBytes: F32.Size()})
			compressed = compressed[1:]
		}
	}
	if total != l.CompressorStateBytesPerSeq {
		b.mismatch("compressor_state_bytes_per_seq", l.CompressorStateBytesPerSeq, total, "the layout's compressor state is not this model's")
		return
	}
	if total == 0 || b.err != nil {
		return
	}
	b.usedSlots = true
	if !b.count("slots", b.counts.Slots) {
		return
	}
	b.addGroup(KVCacheGroup{Name: KVGroupCompressorState, Blocks: b.counts.Slots, Layers: layers}, total)
}

// cfgLayers is every layer of kind, in model order, whatever take consumed.
func (b *groupBuilder) cfgLayers(kind MixerKind) []int64 {
	var out []int64
	for i, l := range b.cfg.Layers {
		if l.Mixer == kind {
			out = append(out, int64(i))
		}
	}
	return out
}

// unused refuses a count for a kind the model does not cache.
func (b *groupBuilder) unused() {
	for _, c := range []struct {
		field string
		n     int64
		used  bool
	}{{"blocks", b.counts.Blocks, b.usedBlocks}, {"sliding_blocks", b.counts.SlidingBlocks, b.usedSliding}, {"slots", b.counts.Slots, b.usedSlots}} {
		if !c.used && c.n != 0 {
			b.fail(&KVCacheError{Field: c.field, Asked: c.n, Reason: "must be 0: the model caches no such kind"})
		}
	}
}
