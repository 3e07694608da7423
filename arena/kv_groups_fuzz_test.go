package arena

import (
	"errors"
	"testing"
)

// kvFuzzConfigs are the configs FuzzKVCacheGroups lays out: every cache
// kind (K and V, sliding window, GDN, Mamba-2, MLA, compressed and
// compressor state).
var kvFuzzConfigs = []string{"llama-3.1-8b.json", "gpt-oss-20b.json", "qwen3-next-80b-a3b-thinking.json",
	"nemotron-h-8b-base-8k.json", "deepseek-v3.json", "deepseek-v4-flash.json"}

// FuzzKVCacheGroups: any kv_block_size and counts give groups that add up
// (Validate passes, the total is blocks × bytes_per_block + sliding blocks ×
// sliding_bytes_per_block + slots × state_bytes_per_seq) or a typed error;
// never a panic.
func FuzzKVCacheGroups(f *testing.F) {
	cfgs := make([]*ModelConfig, len(kvFuzzConfigs))
	for i, name := range kvFuzzConfigs {
		cfgs[i] = loadExample(f, name)
	}
	f.Add(uint8(0), int64(16), int64(100), int64(0), int64(0))
	f.Add(uint8(1), int64(16), int64(7), int64(9), int64(0))
	f.Add(uint8(2), int64(32), int64(3), int64(0), int64(4))
	f.Add(uint8(3), int64(16), int64(1), int64(0), int64(1))
	f.Add(uint8(4), int64(64), int64(1<<40), int64(0), int64(0))
	f.Add(uint8(5), int64(256), int64(2), int64(5), int64(3))
	f.Add(uint8(1), int64(16), int64(1<<62), int64(1<<62), int64(0))
	f.Add(uint8(2), int64(-1), int64(1), int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, which uint8, blockTokens, blocks, sliding, slots int64) {
		cfg := cfgs[int(which)%len(cfgs)]
		l, err := NewKVLayout(cfg, blockTokens)
		if err != nil {
			return
		}
		counts := KVCacheCounts{Blocks: blocks, SlidingBlocks: sliding, Slots: slots}
		gs, err := KVCacheGroups(cfg, l, counts)
		if err != nil {
			if !errors.Is(err, ErrKVCacheSpec) && !errors.Is(err, ErrOverflow) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		s := &KVCacheSpec{ModelType: cfg.ModelType, BlockTokens: blockTokens, Counts: counts, Groups: gs}
		for _, g := range gs {
			s.Bytes += g.Bytes
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("groups that do not validate: %v", err)
		}
		want, err := CheckedSum("want", blocks*l.BytesPerBlock, sliding*l.SlidingBytesPerBlock, slots*l.StateBytesPerSeq)
		if err != nil || want != s.Bytes {
			t.Fatalf("groups hold %d B, the layout prices %d B (%v)", s.Bytes, want, err)
		}
	})
}

// FuzzKVCacheSpecValidate: a spec with one number changed validates only
// if it still adds up; never a panic.
func FuzzKVCacheSpecValidate(f *testing.F) {
	base := validSpec(f)
	f.Add(uint8(0), int64(1))
	f.Add(uint8(3), int64(-1))
	f.Add(uint8(7), int64(1<<62))
	f.Add(uint8(9), int64(0))
	f.Fuzz(func(t *testing.T, field uint8, v int64) {
		s := cloneSpec(base)
		g := &s.Groups[int(field/16)%len(s.Groups)]
		l := &g.Layers[int(field)%len(g.Layers)]
		switch field % 12 {
		case 0:
			g.Blocks = v
		case 1:
			l.Offset = v
		case 2:
			l.Bytes = v
		case 3:
			l.Planes = v
		case 4:
			l.BlockStride = v
		case 5:
			l.PlaneStride = v
		case 6:
			l.EntryStride = v
		case 7:
			l.HeadDim = v
		case 8:
			l.ElementBytes = v
		case 9:
			l.SSMBytes = v
		case 10:
			g.Bytes = v
		case 11:
			s.Bytes = v
		}
		err := s.Validate()
		if err != nil {
			if !errors.Is(err, ErrKVCacheSpec) && !errors.Is(err, ErrOverflow) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		var total int64
		for _, g := range s.Groups {
			var sum int64
			for _, l := range g.Layers {
				sum += l.Bytes
			}
			if sum != g.Bytes || g.Blocks <= 0 {
				t.Fatalf("group %s validates with %d B of layers, %d B, %d blocks", g.Name, sum, g.Bytes, g.Blocks)
			}
			total += g.Bytes
		}
		if total != s.Bytes {
			t.Fatalf("spec validates with %d B of groups, %d B", total, s.Bytes)
		}
	})
}

// cloneSpec is a deep copy of s.
func cloneSpec(s *KVCacheSpec) *KVCacheSpec {
	c := *s
	c.Groups = make([]KVCacheGroup, len(s.Groups))
	for i, g := range s.Groups {
		g.Layers = append([]KVCacheLayer(nil), g.Layers...)
		for j := range g.Layers {
			g.Layers[j].ConvShape = append([]int64(nil), g.Layers[j].ConvShape...)
			g.Layers[j].SSMShape = append([]int64(nil), g.Layers[j].SSMShape...)
		}
		c.Groups[i] = g
	}
	return &c
}
