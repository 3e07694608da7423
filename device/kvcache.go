package device

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gpuarena/gpuarena/arena"
)

// ErrKVAddress is wrapped by every *KVAddressError: a KV cache address asked
// for a layer, block or slot the group does not have, or of a kind the group
// does not hold.
var ErrKVAddress = errors.New("device: kv cache address out of range")

// KVAddressError is a KV cache address refused: Op on group Group for model
// layer Layer and block (or slot) Index, and why. It unwraps to ErrKVAddress.
type KVAddressError struct {
	// Op is the method: "block", "latent", "slot", "state" or "layer".
	Op string
	// Group is the group's name (arena.KVGroup*).
	Group string
	// Layer is the model layer asked; Index the block or slot asked.
	Layer, Index int64
	// Reason says what the group has.
	Reason string
}

// Error names the group, what was asked and what it has.
func (e *KVAddressError) Error() string {
	return fmt.Sprintf("device: kv cache %s address in %s, layer %d, index %d: %s", e.Op, e.Group, e.Layer, e.Index, e.Reason)
}

// Unwrap returns ErrKVAddress.
func (e *KVAddressError) Unwrap() error { return ErrKVAddress }

// KVCache is a KV cache on the device, built by
// gpuarena.Manager.BuildKVCache from Spec and held in the ledger by
// KVCacheOwner: one allocation per group, labelled with the group's name,
// with a ledger view per layer. Treat it as read-only; the ledger, not this
// value, decides what a release frees. A forward step uses its addresses
// through the step's Device, which checks every range against the ledger.
type KVCache struct {
	// Spec is what was built: the counts and the groups' layout.
	Spec *arena.KVCacheSpec `json:"spec"`
	// Groups are the allocated groups, in Spec.Groups' order.
	Groups []KVCacheGroup `json:"groups"`
	// Bytes is the cache's size in bytes, Spec.Bytes: the ledger's bytes
	// for KVCacheOwner.
	Bytes int64 `json:"bytes"`
}

// KVCacheGroup is one group of a KVCache: its layout (arena.KVCacheGroup:
// name, blocks or slots, layers with their offsets and strides) at Ptr.
type KVCacheGroup struct {
	arena.KVCacheGroup
	// Ptr is the group's allocation, Bytes (arena.KVCacheGroup.Bytes) long.
	Ptr DevicePtr `json:"ptr"`
	// LayerPtrs is each layer's base pointer, Ptr + Layers[i].Offset, in
	// Layers' order.
	LayerPtrs []DevicePtr `json:"layer_ptrs"`
}

// NewKVCache is the KVCache of spec with one pointer per group, in order.
// Builders make it; an embedder gets it from BuildKVCache. Errors:
// ErrKVAddress for a pointer count other than the groups' or a NULL pointer.
func NewKVCache(spec *arena.KVCacheSpec, ptrs []DevicePtr) (*KVCache, error) {
	if spec == nil || len(ptrs) != len(spec.Groups) {
		return nil, fmt.Errorf("device: kv cache of %d pointers: %w: one per group of the spec", len(ptrs), ErrKVAddress)
	}
	c := &KVCache{Spec: spec, Bytes: spec.Bytes, Groups: make([]KVCacheGroup, len(ptrs))}
	for i, p := range ptrs {
		if p == 0 {
			return nil, fmt.Errorf("device: kv cache group %s: %w: NULL pointer", spec.Groups[i].Name, ErrKVAddress)
		}
		g := KVCacheGroup{KVCacheGroup: spec.Groups[i], Ptr: p, LayerPtrs: make([]DevicePtr, len(spec.Groups[i].Layers))}
		for j, l := range g.Layers {
			g.LayerPtrs[j] = p + DevicePtr(l.Offset)
		}
		c.Groups[i] = g
	}
	return c, nil
}

// Group returns the group called name (arena.KVGroup*), and false when the
// cache has none.
func (c *KVCache) Group(name string) (*KVCacheGroup, bool) {
	for i := range c.Groups {
		if c.Groups[i].Name == name {
			return &c.Groups[i], true
		}
	}
	return nil, false
}

// Layer returns model layer layer's base pointer and layout in g. Errors: a
// *KVAddressError when g does not cover the layer.
func (g *KVCacheGroup) Layer(layer int64) (DevicePtr, *arena.KVCacheLayer, error) {
	base, l, ok := g.find(layer)
	if !ok {
		return 0, nil, g.notCovered("layer", layer, 0)
	}
	return base, l, nil
}

// find is Layer without the error.
func (g *KVCacheGroup) find(layer int64) (DevicePtr, *arena.KVCacheLayer, bool) {
	i := sort.Search(len(g.Layers), func(i int) bool { return g.Layers[i].Layer >= layer })
	if i == len(g.Layers) || g.Layers[i].Layer != layer || i >= len(g.LayerPtrs) {
		return 0, nil, false
	}
	return g.LayerPtrs[i], &g.Layers[i], true
}

// notCovered is the error of op on a layer g does not cover.
func (g *KVCacheGroup) notCovered(op string, layer, index int64) *KVAddressError {
	return &KVAddressError{Op: op, Group: g.Name, Layer: layer, Index: index,
		Reason: fmt.Sprintf("the group does not cover this layer (it covers %d layers)", len(g.Layers))}
}

// at is block (slot) index's first byte in model layer layer of g, for a
// layer of planes planes.
func (g *KVCacheGroup) at(op string, layer, index int64, planes int64) (DevicePtr, *arena.KVCacheLayer, error) {
	base, l, ok := g.find(layer)
	switch {
	case !ok:
		return 0, nil, g.notCovered(op, layer, index)
	case l.Planes != planes:
		return 0, nil, &KVAddressError{Op: op, Group: g.Name, Layer: layer, Index: index, Reason: fmt.Sprintf("the layer holds %s, not %s", planeKind(l.Planes), planeKind(planes))}
	case index < 0 || index >= g.Blocks:
		return 0, nil, &KVAddressError{Op: op, Group: g.Name, Layer: layer, Index: index, Reason: fmt.Sprintf("the group has %d blocks (slots), 0 to %d", g.Blocks, g.Blocks-1)}
	}
	return base + DevicePtr(index*l.BlockStride), l, nil
}

// planeKind names what a layer of planes planes holds.
func planeKind(planes int64) string {
	switch planes {
	case 2:
		return "K and V (BlockAddr)"
	case 1:
		return "one latent per entry (LatentAddr)"
	}
	return "a state slot per sequence (SlotAddr, StateAddr)"
}

// BlockAddr is block block's K and V in model layer layer of a K and V
// group (kv_full_attention, gpt-oss's kv_sliding_window): each
// [block_size, Heads, HeadDim] of ElementBytes, V PlaneStride after K.
// Errors: a *KVAddressError (ErrKVAddress) for a layer the group does not
// cover, a block outside [0, Blocks), or a group holding a latent or state.
func (g *KVCacheGroup) BlockAddr(layer, block int64) (k, v DevicePtr, err error) {
	k, l, err := g.at("block", layer, block, 2)
	if err != nil {
		return 0, 0, err
	}
	return k, k + DevicePtr(l.PlaneStride), nil
}

// LatentAddr is block block's latent entries, [EntriesPerBlock, HeadDim] of
// ElementBytes, in model layer layer of a latent group (kv_mla,
// kv_compressed, DeepSeek-V4's kv_sliding_window). Errors: a
// *KVAddressError as BlockAddr's.
func (g *KVCacheGroup) LatentAddr(layer, block int64) (DevicePtr, error) {
	p, _, err := g.at("latent", layer, block, 1)
	return p, err
}

// SlotAddr is the first byte of state slot slot of model layer layer in a
// state group (state_gdn, state_mamba2, state_compressor): BlockStride
// bytes. Errors: a *KVAddressError for a layer the group does not cover, a
// slot outside [0, Blocks), or a paged group.
func (g *KVCacheGroup) SlotAddr(layer, slot int64) (DevicePtr, error) {
	p, _, err := g.at("slot", layer, slot, 0)
	return p, err
}

// StateAddr is state slot slot's conv state ([ConvShape] of ElementBytes)
// and SSM state ([SSMShape] of SSMElementBytes, ConvBytes after it) in model
// layer layer of a GDN or Mamba-2 state group. Errors: SlotAddr's, and a
// *KVAddressError for a compressor state, which has no conv and SSM parts.
func (g *KVCacheGroup) StateAddr(layer, slot int64) (conv, ssm DevicePtr, err error) {
	p, l, err := g.at("state", layer, slot, 0)
	if err != nil {
		return 0, 0, err
	}
	if l.ConvBytes == 0 && l.SSMBytes == 0 {
		return 0, 0, &KVAddressError{Op: "state", Group: g.Name, Layer: layer, Index: slot, Reason: "the slot has no conv and SSM state (a compressor state: use SlotAddr)"}
	}
	return p, p + DevicePtr(l.ConvBytes), nil
}
