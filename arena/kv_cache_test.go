package arena

import (
	"errors"
	"testing"
)

// TestKVLayoutByHand: bytes per token, per block of 16 and per sequence for
// each family, worked out by hand (KV in bf16, SSM state in f32).
func TestKVLayoutByHand(t *testing.T) {
	tests := []struct {
		file string
		want KVLayout
	}{
		// 32 full layers × 2 (K, V) × 8 KV heads × 128 × 2 B = 131072 B/token.
		{"llama-3.1-8b.json", KVLayout{PagedLayers: 32, BytesPerToken: 131072, BytesPerBlock: 16 * 131072}},
		// 12 gated full layers × 2 × 2 × 256 × 2 = 24576 B/token. 36 GDN layers:
		// conv [2·16·128 + 32·128 = 8192, 4 − 1] bf16 = 49152 B, SSM [32, 128,
		// 128] f32 = 2,097,152 B per layer.
		{"qwen3-next-80b-a3b-thinking.json", KVLayout{PagedLayers: 12, BytesPerToken: 24576, BytesPerBlock: 393216,
			StateLayers: 36, ConvStateBytesPerSeq: 36 * 49152, SSMStateBytesPerSeq: 36 * 2_097_152,
			StateBytesPerSeq: 36 * (49152 + 2_097_152)}},
		// MLA: 61 layers × (512 + 64) × 2 B = 70272 B/token.
		{"deepseek-v3.json", KVLayout{PagedLayers: 61, BytesPerToken: 70272, BytesPerBlock: 1_124_352}},
		// 12 full + 12 sliding (window 128) layers × 2 × 8 × 64 × 2 = 24576 B/token each.
		{"gpt-oss-20b.json", KVLayout{PagedLayers: 12, BytesPerToken: 24576, BytesPerBlock: 393216,
			SlidingLayers: 12, SlidingWindow: 128, SlidingBytesPerToken: 24576, SlidingBytesPerBlock: 393216}},
		// 4 attention layers × 2 × 8 × 128 × 2 = 16384 B/token. 24 Mamba-2
		// layers: conv [8192 + 2·8·128 = 10240, 3] bf16 = 61440 B, SSM [128, 64,
		// 128] f32 = 4,194,304 B per layer.
		{"nemotron-h-8b-base-8k.json", KVLayout{PagedLayers: 4, BytesPerToken: 16384, BytesPerBlock: 262144,
			StateLayers: 24, ConvStateBytesPerSeq: 24 * 61440, SSMStateBytesPerSeq: 24 * 4_194_304,
			StateBytesPerSeq: 24 * (61440 + 4_194_304)}},
		// V4 Flash: 21 ratio-4 layers of (512 + 128 indexer) × 2 B / 4 = 320
		// B/token and 20 ratio-128 layers of 512 × 2 / 128 = 8 → 6880 B/token.
		// Per block of 16: 21 × ⌈16/4⌉ × 1280 + 20 × ⌈16/128⌉ × 1024 = 128000.
		// All 43 layers keep a 128-token window of one 512 latent: 44032
		// B/token. Compressor state: ratio 4 (coff 2): 8 entries × 2·2·512 f32
		// = 65536 B, its indexer's 8 × 2·2·128 f32 = 16384 B; ratio 128: 128 ×
		// 2·512 f32 = 524,288 B.
		{"deepseek-v4-flash.json", KVLayout{PagedLayers: 41, BytesPerToken: 6880, BytesPerBlock: 128000,
			SlidingLayers: 43, SlidingWindow: 128, SlidingBytesPerToken: 44032, SlidingBytesPerBlock: 704512,
			CompressorStateBytesPerSeq: 21*(65536+16384) + 20*524_288, StateBytesPerSeq: 21*(65536+16384) + 20*524_288}},
	}
	for _, tt := range tests {
		l, err := NewKVLayout(loadExample(t, tt.file), 16)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		tt.want.BlockTokens = 16
		l.Notes = nil
		if !kvEqual(l, tt.want) {
			t.Errorf("%s:\n got  %+v\n want %+v", tt.file, l, tt.want)
		}
	}
}

// kvEqual compares two layouts without their notes.
func kvEqual(a, b KVLayout) bool {
	a.Notes, b.Notes = nil, nil
	return a.BlockTokens == b.BlockTokens && a.PagedLayers == b.PagedLayers && a.BytesPerToken == b.BytesPerToken &&
		a.BytesPerBlock == b.BytesPerBlock && a.SlidingLayers == b.SlidingLayers && a.SlidingWindow == b.SlidingWindow &&
		a.SlidingBytesPerToken == b.SlidingBytesPerToken && a.SlidingBytesPerBlock == b.SlidingBytesPerBlock &&
		a.StateLayers == b.StateLayers && a.ConvStateBytesPerSeq == b.ConvStateBytesPerSeq &&
		a.SSMStateBytesPerSeq == b.SSMStateBytesPerSeq && a.CompressorStateBytesPerSeq == b.CompressorStateBytesPerSeq &&
		a.StateBytesPerSeq == b.StateBytesPerSeq
}

// TestKVSeqBytes: a sequence holds ⌈L/b⌉ paged blocks, min(⌈L/b⌉, ⌈W/b⌉ + 1)
// sliding blocks and its state.
func TestKVSeqBytes(t *testing.T) {
	oss, err := NewKVLayout(loadExample(t, "gpt-oss-20b.json"), 16)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ seqLen, paged, sliding int64 }{
		{1, 1, 1}, {100, 7, 7}, {128, 8, 8}, {144, 9, 9}, {145, 10, 9}, {32768, 2048, 9},
	} {
		p, s := oss.SeqBlocks(tt.seqLen)
		b, err := oss.SeqBytes(tt.seqLen)
		if p != tt.paged || s != tt.sliding || err != nil || b != (tt.paged+tt.sliding)*393216 {
			t.Errorf("gpt-oss-20b L=%d: %d paged, %d sliding, %d B, %v; want %d, %d", tt.seqLen, p, s, b, err, tt.paged, tt.sliding)
		}
	}
	v4, err := NewKVLayout(loadExample(t, "deepseek-v4-flash.json"), 16)
	if err != nil {
		t.Fatal(err)
	}
	// 2048 × 128000 + 9 × 704512 + 12,206,080.
	if b, err := v4.SeqBytes(32768); err != nil || b != 2048*128000+9*704512+12_206_080 {
		t.Errorf("v4 flash seq bytes %d, %v", b, err)
	}
	if f, err := v4.FixedBytesPerSeq(32768); err != nil || f != 9*704512+12_206_080 {
		t.Errorf("v4 flash fixed bytes %d, %v", f, err)
	}
	if p, s := v4.SeqBlocks(0); p != 0 || s != 0 {
		t.Errorf("empty sequence: %d, %d blocks", p, s)
	}
}

// TestKVSSMStateDType: mamba_ssm_cache_dtype sizes the SSM state.
func TestKVSSMStateDType(t *testing.T) {
	nano, err := NewKVLayout(loadExample(t, "nemotron-3-nano-30b-a3b.json"), 16)
	if err != nil {
		t.Fatal(err)
	}
	// "float32": 23 layers × [64, 64, 128] × 4 B; no note.
	if nano.SSMStateBytesPerSeq != 23*64*64*128*4 || len(nano.Notes) != 0 {
		t.Errorf("nano ssm %d, notes %q", nano.SSMStateBytesPerSeq, nano.Notes)
	}
	cfg, err := ParseConfig(mutate(t, "nemotron-3-nano-30b-a3b.json", map[string]string{"mamba_ssm_cache_dtype": `"bfloat16"`}))
	if err != nil {
		t.Fatal(err)
	}
	half, err := NewKVLayout(cfg, 16)
	if err != nil || half.SSMStateBytesPerSeq != nano.SSMStateBytesPerSeq/2 {
		t.Errorf("bf16 ssm %d, %v", half.SSMStateBytesPerSeq, err)
	}
	h8, err := NewKVLayout(loadExample(t, "nemotron-h-8b-base-8k.json"), 16)
	if err != nil || !hasNote(h8.Notes, "mamba_ssm_cache_dtype is absent") {
		t.Errorf("notes %q, %v", h8.Notes, err)
	}
	if b, note := SSMStateDType("float8"); b != 4 || note == "" {
		t.Errorf("unknown dtype: %d, %q", b, note)
	}
}

func TestKVBytesPerBlock(t *testing.T) {
	tests := []struct {
		file string
		want int64
	}{
		{"llama-3.1-8b.json", 2097152},               // 16 × 32 × 2 × 8 × 128 × 2
		{"qwen3-next-80b-a3b-thinking.json", 393216}, // 16 × 12 full layers × 2 × 2 × 256 × 2
		{"gpt-oss-20b.json", 393216},                 // 16 × 12 full layers × 2 × 8 × 64 × 2
		{"nemotron-h-8b-base-8k.json", 262144},       // 16 × 4 attention layers × 2 × 8 × 128 × 2
		{"deepseek-v3.json", 1124352},                // MLA: 16 × 61 × (512 + 64) × 2
		// V4 flash: 21 ratio-4 layers × ⌈16/4⌉ × (512 + 128) × 2 = 107520
		//         + 20 ratio-128 layers × ⌈16/128⌉ × 512 × 2 = 20480
		{"deepseek-v4-flash.json", 128000},
	}
	for _, tt := range tests {
		got, err := KVBytesPerBlock(loadExample(t, tt.file), 16)
		if err != nil || got != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.file, got, err, tt.want)
		}
	}
	if _, err := KVBytesPerBlock(loadExample(t, "llama-3.1-8b.json"), 0); !isOption(err, "kv_block_size") {
		t.Errorf("kv_block_size 0: err = %v", err)
	}
	if _, err := KVBytesPerBlock(nil, 16); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil cfg: err = %v", err)
	}
	huge := *loadExample(t, "llama-3.1-8b.json")
	huge.HeadDim = 1 << 60
	if _, err := NewKVLayout(&huge, 16); !errors.Is(err, ErrOverflow) {
		t.Errorf("huge head_dim: err = %v", err)
	}
}
