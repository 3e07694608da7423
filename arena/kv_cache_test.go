package arena

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestKVLayoutByHand: bytes per token, per block of 16 and per sequence for
// each family, worked out by hand, under the default options (KV in the
// model dtype, bf16; the SSM state as vLLM resolves mamba_ssm_cache_dtype
// auto).
func TestKVLayoutByHand(t *testing.T) {
	tests := []struct {
		file string
		want KVLayout
	}{
		// 32 full layers × 2 (K, V) × 8 KV heads × 128 × 2 B = 131072 B/token.
		{"llama-3.1-8b.json", KVLayout{PagedLayers: 32, BytesPerToken: 131072, BytesPerBlock: 16 * 131072}},
		// 12 gated full layers × 2 × 2 × 256 × 2 = 24576 B/token. 36 GDN layers:
		// conv [2·16·128 + 32·128 = 8192, 4 − 1] bf16 = 49152 B, SSM [32, 128,
		// 128] in the model dtype (vLLM's auto for GDN) = 1,048,576 B per layer.
		{"qwen3-next-80b-a3b-thinking.json", KVLayout{PagedLayers: 12, BytesPerToken: 24576, BytesPerBlock: 393216,
			StateLayers: 36, ConvStateBytesPerSeq: 36 * 49152, SSMStateBytesPerSeq: 36 * 1_048_576,
			StateBytesPerSeq: 36 * (49152 + 1_048_576), SSMStateDType: "bfloat16"}},
		// MLA: 61 layers × (512 + 64) × 2 B = 70272 B/token.
		{"deepseek-v3.json", KVLayout{PagedLayers: 61, BytesPerToken: 70272, BytesPerBlock: 1_124_352}},
		// 12 full + 12 sliding (window 128) layers × 2 × 8 × 64 × 2 = 24576 B/token each.
		{"gpt-oss-20b.json", KVLayout{PagedLayers: 12, BytesPerToken: 24576, BytesPerBlock: 393216,
			SlidingLayers: 12, SlidingWindow: 128, SlidingBytesPerToken: 24576, SlidingBytesPerBlock: 393216}},
		// 4 attention layers × 2 × 8 × 128 × 2 = 16384 B/token. 24 Mamba-2
		// layers: conv [8192 + 2·8·128 = 10240, 3] bf16 = 61440 B, SSM [128, 64,
		// 128] f32 (vLLM's NemotronH default) = 4,194,304 B per layer.
		{"nemotron-h-8b-base-8k.json", KVLayout{PagedLayers: 4, BytesPerToken: 16384, BytesPerBlock: 262144,
			StateLayers: 24, ConvStateBytesPerSeq: 24 * 61440, SSMStateBytesPerSeq: 24 * 4_194_304,
			StateBytesPerSeq: 24 * (61440 + 4_194_304), SSMStateDType: "float32"}},
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
		tt.want.BlockTokens, tt.want.MaxBatchTokens, tt.want.KVCacheDType, tt.want.KVElementBytes = 16, DefaultMaxBatchTokens, "bfloat16", 2
		l.Notes = nil
		if !reflect.DeepEqual(l, tt.want) {
			t.Errorf("%s:\n got  %+v\n want %+v", tt.file, l, tt.want)
		}
	}
}

// kvEqual compares two layouts' sizes: every field but the notes and the
// options and dtypes they were computed under (TestKVLayoutByHand checks
// those).
func kvEqual(a, b KVLayout) bool {
	return a.BlockTokens == b.BlockTokens && a.PagedLayers == b.PagedLayers && a.BytesPerToken == b.BytesPerToken &&
		a.BytesPerBlock == b.BytesPerBlock && a.SlidingLayers == b.SlidingLayers && a.SlidingWindow == b.SlidingWindow &&
		a.SlidingBytesPerToken == b.SlidingBytesPerToken && a.SlidingBytesPerBlock == b.SlidingBytesPerBlock &&
		a.StateLayers == b.StateLayers && a.ConvStateBytesPerSeq == b.ConvStateBytesPerSeq &&
		a.SSMStateBytesPerSeq == b.SSMStateBytesPerSeq && a.CompressorStateBytesPerSeq == b.CompressorStateBytesPerSeq &&
		a.StateBytesPerSeq == b.StateBytesPerSeq
}

// TestKVSeqBytes: a sequence holds ⌈L/b⌉ paged blocks, ⌈min(W − 1 + M,
// L)/b⌉ + 1 sliding blocks (vLLM's chunked-prefill reservation) and its
// state.
func TestKVSeqBytes(t *testing.T) {
	oss, err := NewKVLayout(loadExample(t, "gpt-oss-20b.json"), 16)
	if err != nil {
		t.Fatal(err)
	}
	// W − 1 + M = 127 + 8192 = 8319 tokens: ⌈8319/16⌉ + 1 = 521 blocks.
	for _, tt := range []struct{ seqLen, paged, sliding int64 }{
		{1, 1, 2}, {100, 7, 8}, {128, 8, 9}, {144, 9, 10}, {145, 10, 11}, {8319, 520, 521}, {8320, 520, 521}, {32768, 2048, 521},
	} {
		p, s := oss.SeqBlocks(tt.seqLen)
		b, err := oss.SeqBytes(tt.seqLen)
		if p != tt.paged || s != tt.sliding || err != nil || b != (tt.paged+tt.sliding)*393216 {
			t.Errorf("gpt-oss-20b L=%d: %d paged, %d sliding, %d B, %v; want %d, %d", tt.seqLen, p, s, b, err, tt.paged, tt.sliding)
		}
	}
	// Decode only (max_batch_tokens 1): the window of 128 tokens, ⌈128/16⌉ + 1.
	dec, err := NewKVLayoutFor(loadExample(t, "gpt-oss-20b.json"), Options{MaxBatchTokens: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, s := dec.SeqBlocks(32768); s != 9 {
		t.Errorf("max_batch_tokens 1: %d sliding blocks, want 9", s)
	}
	// A window near int64's end does not overflow: the sequence bounds it.
	huge := oss
	huge.SlidingWindow = math.MaxInt64
	if _, s := huge.SeqBlocks(32768); s != 2049 {
		t.Errorf("huge window: %d sliding blocks, want 2049", s)
	}
	v4, err := NewKVLayout(loadExample(t, "deepseek-v4-flash.json"), 16)
	if err != nil {
		t.Fatal(err)
	}
	// 2048 × 128000 + 521 × 704512 + 12,206,080.
	if b, err := v4.SeqBytes(32768); err != nil || b != 2048*128000+521*704512+12_206_080 {
		t.Errorf("v4 flash seq bytes %d, %v", b, err)
	}
	if f, err := v4.FixedBytesPerSeq(32768); err != nil || f != 521*704512+12_206_080 {
		t.Errorf("v4 flash fixed bytes %d, %v", f, err)
	}
	if p, s := v4.SeqBlocks(0); p != 0 || s != 0 {
		t.Errorf("empty sequence: %d, %d blocks", p, s)
	}
}

// TestKVSSMStateDType: mamba_ssm_cache_dtype sizes the SSM state as vLLM
// resolves it: the option, else the config's, else float32 for Mamba-2
// (NemotronH) and the model dtype for GDN.
func TestKVSSMStateDType(t *testing.T) {
	nanoCfg := loadExample(t, "nemotron-3-nano-30b-a3b.json")
	nano, err := NewKVLayout(nanoCfg, 16)
	if err != nil {
		t.Fatal(err)
	}
	// Config "float32": 23 layers × [64, 64, 128] × 4 B; no note.
	if nano.SSMStateBytesPerSeq != 23*64*64*128*4 || nano.SSMStateDType != "float32" || len(nano.Notes) != 0 {
		t.Errorf("nano ssm %d %s, notes %q", nano.SSMStateBytesPerSeq, nano.SSMStateDType, nano.Notes)
	}
	cfg, err := ParseConfig(mutate(t, "nemotron-3-nano-30b-a3b.json", map[string]string{"mamba_ssm_cache_dtype": `"bfloat16"`}))
	if err != nil {
		t.Fatal(err)
	}
	if half, err := NewKVLayout(cfg, 16); err != nil || half.SSMStateBytesPerSeq != nano.SSMStateBytesPerSeq/2 || half.SSMStateDType != "bfloat16" {
		t.Errorf("config bf16 ssm %d %s, %v", half.SSMStateBytesPerSeq, half.SSMStateDType, err)
	}
	// The option wins over the config.
	if opt, err := NewKVLayoutFor(nanoCfg, Options{MambaSSMCacheDType: "fp16"}); err != nil || opt.SSMStateBytesPerSeq != nano.SSMStateBytesPerSeq/2 || opt.SSMStateDType != "float16" {
		t.Errorf("option fp16 ssm %d %s, %v", opt.SSMStateBytesPerSeq, opt.SSMStateDType, err)
	}
	// Mamba-2 without the field: float32, vLLM's NemotronH default, no note.
	if h8, err := NewKVLayout(loadExample(t, "nemotron-h-8b-base-8k.json"), 16); err != nil || h8.SSMStateDType != "float32" || len(h8.Notes) != 0 {
		t.Errorf("h8 %s, notes %q, %v", h8.SSMStateDType, h8.Notes, err)
	}
	// GDN without the field: the model dtype, with a note; float32 on request.
	next := loadExample(t, "qwen3-next-80b-a3b-thinking.json")
	auto, err := NewKVLayout(next, 16)
	if err != nil || auto.SSMStateBytesPerSeq != 36*32*128*128*2 || !hasNote(auto.Notes, "follows the model dtype (bfloat16)") {
		t.Errorf("qwen3-next auto ssm %d, notes %q, %v", auto.SSMStateBytesPerSeq, auto.Notes, err)
	}
	if f32, err := NewKVLayoutFor(next, Options{MambaSSMCacheDType: SSMCacheFloat32}); err != nil || f32.SSMStateBytesPerSeq != 36*32*128*128*4 || len(f32.Notes) != 0 {
		t.Errorf("qwen3-next float32 ssm %d, notes %q, %v", f32.SSMStateBytesPerSeq, f32.Notes, err)
	}
	cfg, err = ParseConfig(mutate(t, "nemotron-3-nano-30b-a3b.json", map[string]string{"mamba_ssm_cache_dtype": `"float8"`}))
	if err != nil {
		t.Fatal(err)
	}
	if odd, err := NewKVLayout(cfg, 16); err != nil || odd.SSMStateBytesPerSeq != nano.SSMStateBytesPerSeq || !hasNote(odd.Notes, `"float8" is not known`) {
		t.Errorf("unknown config dtype: %d, notes %q, %v", odd.SSMStateBytesPerSeq, odd.Notes, err)
	}
	if _, err := NewKVLayoutFor(next, Options{MambaSSMCacheDType: "float8"}); !isOption(err, "mamba_ssm_cache_dtype") {
		t.Errorf("unknown option dtype: %v", err)
	}
}

// TestKVCacheDType: kv_cache_dtype sizes the paged and sliding KV as vLLM
// does: auto is the model dtype, fp8 is fp8_e4m3, one byte.
func TestKVCacheDType(t *testing.T) {
	llama := loadExample(t, "llama-3.1-8b.json")
	for _, tt := range []struct {
		in, name string
		perBlock int64
	}{
		{"", "bfloat16", 2_097_152}, {"auto", "bfloat16", 2_097_152}, {"bf16", "bfloat16", 2_097_152},
		{"FP16", "float16", 2_097_152}, {"fp8", "fp8_e4m3", 1_048_576}, {"fp8_e4m3", "fp8_e4m3", 1_048_576},
		{"fp8_e5m2", "fp8_e5m2", 1_048_576},
	} {
		l, err := NewKVLayoutFor(llama, Options{KVCacheDType: KVCacheDType(tt.in)})
		if err != nil || l.KVCacheDType != tt.name || l.BytesPerBlock != tt.perBlock || l.KVElementBytes != tt.perBlock/1_048_576 {
			t.Errorf("kv_cache_dtype %q: %s, %d B/block, %d B/element, %v; want %s, %d", tt.in, l.KVCacheDType, l.BytesPerBlock, l.KVElementBytes, err, tt.name, tt.perBlock)
		}
	}
	half, err := ParseConfig(mutate(t, "llama-3.1-8b.json", map[string]string{"torch_dtype": `"float16"`}))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := NewKVLayout(half, 16); err != nil || l.KVCacheDType != "float16" || l.BytesPerBlock != 2_097_152 {
		t.Errorf("float16 model, auto: %s, %d, %v", l.KVCacheDType, l.BytesPerBlock, err)
	}
	// fp8 halves the sliding-window KV too, not the recurrent state.
	oss, err := NewKVLayoutFor(loadExample(t, "gpt-oss-20b.json"), Options{KVCacheDType: KVCacheFP8})
	if err != nil || oss.BytesPerBlock != 196_608 || oss.SlidingBytesPerBlock != 196_608 {
		t.Errorf("gpt-oss fp8: %d, %d B/block, %v", oss.BytesPerBlock, oss.SlidingBytesPerBlock, err)
	}
	next, err := NewKVLayoutFor(loadExample(t, "qwen3-next-80b-a3b-thinking.json"), Options{KVCacheDType: KVCacheFP8})
	if err != nil || next.BytesPerBlock != 196_608 || next.StateBytesPerSeq != 36*(49152+1_048_576) {
		t.Errorf("qwen3-next fp8: %d B/block, %d B state, %v", next.BytesPerBlock, next.StateBytesPerSeq, err)
	}
	if _, err := NewKVLayoutFor(llama, Options{KVCacheDType: "int4"}); !isOption(err, "kv_cache_dtype") || !strings.Contains(err.Error(), "fp8_e5m2") {
		t.Errorf("kv_cache_dtype int4: %v", err)
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
