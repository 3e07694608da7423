package device_test

import (
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// kvSpec is a hand-made spec: a K and V group of layers 1 and 3 (2 heads of
// 4 BF16 elements, blocks of 2 tokens, 3 blocks) and a state group of layer
// 2 (conv [1, 4] BF16, SSM [2] F32, 2 slots).
func kvSpec() *arena.KVCacheSpec {
	kvLayer := func(layer, offset int64) arena.KVCacheLayer {
		return arena.KVCacheLayer{Layer: layer, Offset: offset, Bytes: 2 * 3 * 32, Planes: 2, BlockStride: 32, PlaneStride: 3 * 32,
			EntriesPerBlock: 2, CompressRatio: 1, EntryStride: 16, Heads: 2, HeadDim: 4, HeadStride: 8, ElementBytes: 2}
	}
	return &arena.KVCacheSpec{ModelType: "test", BlockTokens: 2, Bytes: 2*192 + 32, Groups: []arena.KVCacheGroup{
		{Name: arena.KVGroupFullAttention, BlockTokens: 2, Blocks: 3, Bytes: 2 * 192, Layers: []arena.KVCacheLayer{kvLayer(1, 0), kvLayer(3, 192)}},
		{Name: arena.KVGroupGDNState, Blocks: 2, Bytes: 32, Layers: []arena.KVCacheLayer{{Layer: 2, Bytes: 32, BlockStride: 16,
			ElementBytes: 2, ConvShape: []int64{1, 4}, ConvBytes: 8, SSMShape: []int64{2}, SSMElementBytes: 4, SSMBytes: 8}}},
	}}
}

func TestKVCacheAddresses(t *testing.T) {
	spec := kvSpec()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := device.NewKVCache(spec, []device.DevicePtr{0x10000, 0x20000})
	if err != nil {
		t.Fatal(err)
	}
	kv, ok := c.Group(arena.KVGroupFullAttention)
	if !ok || kv.LayerPtrs[1] != 0x10000+192 || c.Bytes != spec.Bytes {
		t.Fatalf("group %v, layer pointers %#x", ok, kv.LayerPtrs)
	}
	// Layer 3 starts at 192; block 2's K at 2·32 more, its V 3·32 after K.
	k, v, err := kv.BlockAddr(3, 2)
	if err != nil || k != 0x10000+192+64 || v != k+96 {
		t.Fatalf("BlockAddr(3, 2) = %#x, %#x, %v", k, v, err)
	}
	st, _ := c.Group(arena.KVGroupGDNState)
	conv, ssm, err := st.StateAddr(2, 1)
	if err != nil || conv != 0x20000+16 || ssm != conv+8 {
		t.Fatalf("StateAddr(2, 1) = %#x, %#x, %v", conv, ssm, err)
	}
	if p, err := st.SlotAddr(2, 1); err != nil || p != conv {
		t.Fatalf("SlotAddr(2, 1) = %#x, %v", p, err)
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"block past the end", func() error { _, _, err := kv.BlockAddr(1, 3); return err }},
		{"negative block", func() error { _, _, err := kv.BlockAddr(1, -1); return err }},
		{"layer not covered", func() error { _, _, err := kv.BlockAddr(2, 0); return err }},
		{"latent of a K and V layer", func() error { _, err := kv.LatentAddr(1, 0); return err }},
		{"slot of a paged layer", func() error { _, err := kv.SlotAddr(1, 0); return err }},
		{"block of a state layer", func() error { _, _, err := st.BlockAddr(2, 0); return err }},
		{"slot past the end", func() error { _, err := st.SlotAddr(2, 2); return err }},
		{"layer lookup", func() error { _, _, err := st.Layer(7); return err }},
	} {
		var ae *device.KVAddressError
		if err := c.call(); !errors.As(err, &ae) || !errors.Is(err, device.ErrKVAddress) {
			t.Errorf("%s: %v, want a *KVAddressError", c.name, err)
		}
	}
	if _, err := device.NewKVCache(spec, []device.DevicePtr{1}); !errors.Is(err, device.ErrKVAddress) {
		t.Fatalf("one pointer for two groups: %v", err)
	}
	if _, err := device.NewKVCache(spec, []device.DevicePtr{1, 0}); !errors.Is(err, device.ErrKVAddress) {
		t.Fatalf("a NULL pointer: %v", err)
	}
}
