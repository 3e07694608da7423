package arena

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestEveryBufferHasRuleAndName(t *testing.T) {
	names := map[string]BufferID{}
	for _, id := range BufferIDs() {
		if rules[id] == nil {
			t.Errorf("BufferID %d (%s) has no rule", id, id)
		}
		name := id.String()
		if name == "" || name == "buffer(?)" {
			t.Errorf("BufferID %d has no name", id)
		}
		if prev, dup := names[name]; dup {
			t.Errorf("BufferIDs %d and %d share the name %q", prev, id, name)
		}
		names[name] = id
	}
	if len(BufferIDs()) != int(NumBuffers) {
		t.Errorf("BufferIDs() has %d ids, want %d", len(BufferIDs()), NumBuffers)
	}
}

// Zero-fill is a property of the buffer (design.md §5): norm_unit_w, and
// only it, is zero-filled after allocation.
func TestZeroFill(t *testing.T) {
	var filled []string
	for _, id := range BufferIDs() {
		if id.ZeroFill() {
			filled = append(filled, id.String())
		}
	}
	if len(filled) != 1 || filled[0] != "norm_unit_w" {
		t.Errorf("zero-filled buffers %q, want [norm_unit_w]", filled)
	}
	if NumBuffers.ZeroFill() || BufferID(255).ZeroFill() {
		t.Error("an id past the table is zero-filled")
	}
}

// handSizes are the bytes of the key buffers at default options (M = 8192),
// worked out by hand; 0 means absent.
type handSizes struct {
	hidden, logits, qkv, qkvz, gate, up, down int64
}

func TestPlanKeyBuffersByHand(t *testing.T) {
	want := map[string]handSizes{
		"llama-3.1-8b.json": {
			hidden: 67108864,   // 8192 × 4096 × 2
			logits: 2101346304, // 8192 × 128256 × 2
			qkv:    100663296,  // 8192 × (32 + 2·8)·128 = 8192 × 6144 × 2
		},
		"gemma-3-27b-it.json": { // the language model: text_config
			hidden: 88080384,   // 8192 × 5376 × 2
			logits: 4296015872, // 8192 × 262208 × 2
			qkv:    134217728,  // 8192 × (32 + 2·16)·128 = 8192 × 8192 × 2
		},
		"qwen2.5-vl-7b-instruct.json": { // the language model
			hidden: 58720256,   // 8192 × 3584 × 2
			logits: 2491416576, // 8192 × 152064 × 2
			qkv:    75497472,   // 8192 × (28 + 2·4)·128 = 8192 × 4608 × 2
		},
		"qwen3-0.6b.json": {
			hidden: 16777216,   // 8192 × 1024 × 2
			logits: 2489319424, // 8192 × 151936 × 2
			qkv:    67108864,   // 8192 × (16 + 2·8)·128 = 8192 × 4096 × 2
		},
		"qwen3-8b.json": {
			hidden: 67108864,   // 8192 × 4096 × 2
			logits: 2489319424, // 8192 × 151936 × 2
			qkv:    100663296,  // 8192 × (32 + 2·8)·128 = 8192 × 6144 × 2
		},
		"qwen3-32b.json": {
			hidden: 83886080,   // 8192 × 5120 × 2
			logits: 2489319424, // 8192 × 151936 × 2
			qkv:    167772160,  // 8192 × (64 + 2·8)·128 = 8192 × 10240 × 2
		},
		"qwen3-30b-a3b.json": {
			hidden: 33554432,   // 8192 × 2048 × 2
			logits: 2489319424, // 8192 × 151936 × 2
			qkv:    83886080,   // 8192 × (32 + 2·4)·128 = 8192 × 5120 × 2
			gate:   100663296,  // k2·K = 8192·8 = 65536 rows × Im 768 × 2
			up:     100663296,  // same as gate
			down:   268435456,  // 65536 × H 2048 × 2
		},
		"mixtral-8x7b-v0.1.json": {
			hidden: 67108864,  // 8192 × 4096 × 2
			logits: 524288000, // 8192 × 32000 × 2
			qkv:    100663296, // 8192 × (32 + 2·8)·128 = 8192 × 6144 × 2
			gate:   469762048, // k2·K = 8192·2 = 16384 rows × Im = intermediate_size 14336 × 2
			up:     469762048, // same as gate
			down:   134217728, // 16384 × 4096 × 2
		},
		"qwen3-next-80b-a3b-thinking.json": {
			hidden: 33554432,   // 8192 × 2048 × 2
			logits: 2489319424, // 8192 × 151936 × 2
			qkv:    150994944,  // gated: 8192 × (2·16 + 2·2)·256 = 8192 × 9216 × 2
			qkvz:   201326592,  // 8192 × (2·16·128 + 2·32·128 = 12288) × 2
			gate:   83886080,   // k2·K = 8192·10 = 81920 rows × Im 512 × 2
			up:     83886080,   // same as gate
			down:   335544320,  // 81920 × 2048 × 2
		},
		"deepseek-v3.json": {
			hidden: 117440512,  // 8192 × 7168 × 2
			logits: 2118123520, // 8192 × 129280 × 2
			qkv:    412090368,  // MLA: 8192 × (128·(128+64) + 512 + 64 = 25152) × 2
			gate:   268435456,  // k2·K = 8192·8 = 65536 rows × Im 2048 × 2
			up:     268435456,  // same as gate
			down:   939524096,  // 65536 × 7168 × 2
		},
		"deepseek-v4-flash.json": {
			hidden: 67108864,   // 8192 × 4096 × 2
			logits: 2118123520, // 8192 × 129280 × 2
			qkv:    545259520,  // V4: 8192 × (64 + 1)·512 = 8192 × 33280 × 2
			gate:   201326592,  // k2·K = 8192·6 = 49152 rows × Im 2048 × 2
			up:     201326592,  // same as gate
			down:   402653184,  // 49152 × 4096 × 2
		},
		"deepseek-v4-pro.json": {
			hidden: 117440512,  // 8192 × 7168 × 2
			logits: 2118123520, // 8192 × 129280 × 2
			qkv:    1082130432, // V4: 8192 × (128 + 1)·512 = 8192 × 66048 × 2
			gate:   301989888,  // k2·K = 8192·6 = 49152 rows × Im 3072 × 2
			up:     301989888,  // same as gate
			down:   704643072,  // 49152 × 7168 × 2
		},
		"nemotron-h-8b-base-8k.json": {
			hidden: 67108864,   // 8192 × 4096 × 2
			logits: 2147483648, // 8192 × 131072 × 2
			qkv:    100663296,  // 8192 × (32 + 2·8)·128 (attention_head_dim) = 8192 × 6144 × 2
		},
		"nemotron-h-56b-base-8k.json": {
			hidden: 134217728,  // 8192 × 8192 × 2
			logits: 2147483648, // 8192 × 131072 × 2
			qkv:    167772160,  // 8192 × (64 + 2·8)·128 = 8192 × 10240 × 2
		},
		"nemotron-3-nano-30b-a3b.json": {
			hidden: 44040192,   // 8192 × 2688 × 2
			logits: 2147483648, // 8192 × 131072 × 2
			qkv:    75497472,   // 8192 × (32 + 2·2)·128 = 8192 × 4608 × 2
			gate:   182452224,  // k2·K = 8192·6 = 49152 rows × Im 1856 × 2
			up:     182452224,  // same as gate
			down:   264241152,  // 49152 × 2688 × 2
		},
		"gpt-oss-20b.json": {
			hidden: 47185920,   // 8192 × 2880 × 2
			logits: 3294625792, // 8192 × 201088 × 2
			qkv:    83886080,   // 8192 × (64 + 2·8)·64 = 8192 × 5120 × 2
			gate:   188743680,  // k2·K = 8192·4 = 32768 rows × Im = intermediate_size 2880 × 2
			up:     188743680,  // same as gate
			down:   188743680,  // 32768 × 2880 × 2
		},
		"gpt-oss-120b.json": {
			hidden: 47185920,   // 8192 × 2880 × 2
			logits: 3294625792, // 8192 × 201088 × 2
			qkv:    83886080,   // 8192 × (64 + 2·8)·64 = 8192 × 5120 × 2
			gate:   188743680,  // 32768 rows × 2880 × 2
			up:     188743680,  // same as gate
			down:   188743680,  // 32768 × 2880 × 2
		},
		"glm-4.5-air.json": {
			hidden: 67108864,   // 8192 × 4096 × 2
			logits: 2483027968, // 8192 × 151552 × 2
			qkv:    234881024,  // 8192 × (96 + 2·8)·128 = 8192 × 14336 × 2
			gate:   184549376,  // k2·K = 8192·8 = 65536 rows × Im 1408 × 2
			up:     184549376,  // same as gate
			down:   536870912,  // 65536 × H 4096 × 2
		},
	}
	for _, path := range exampleConfigs(t) {
		file := filepath.Base(path)
		t.Run(file, func(t *testing.T) {
			w, ok := want[file]
			if !ok {
				t.Fatalf("no hand-worked sizes for %s", file)
			}
			_, plan := planExample(t, file, Options{})
			got := handSizes{
				hidden: plan.Buffers[HiddenStates].Bytes,
				logits: plan.Buffers[Logits].Bytes,
				qkv:    plan.Buffers[QKVOutput].Bytes,
				qkvz:   plan.Buffers[SSMQKVZ].Bytes,
				gate:   plan.Buffers[ExpertGateOut].Bytes,
				up:     plan.Buffers[ExpertUpOut].Bytes,
				down:   plan.Buffers[ExpertDownOut].Bytes,
			}
			if got != w {
				t.Errorf("got  %+v\nwant %+v", got, w)
			}
			checkPlanInvariants(t, plan)
		})
	}
}

// checkPlanInvariants: totals add up, absent buffers have a reason and no
// bytes, present ones a dtype and a shape whose product is their bytes.
func checkPlanInvariants(t testing.TB, plan *Plan) {
	t.Helper()
	var sum, slabs int64
	for i, b := range plan.Buffers {
		if b.ID != BufferID(i) {
			t.Errorf("Buffers[%d].ID = %v", i, b.ID)
		}
		if b.Present() {
			n := b.DType.Size()
			for _, d := range b.Shape {
				n *= d
			}
			if b.Absent != "" || n != b.Bytes {
				t.Errorf("%v: absent %q, shape %v × %d B ≠ %d", b.ID, b.Absent, b.Shape, b.DType.Size(), b.Bytes)
			}
		} else if b.Absent == "" || b.Bytes != 0 || b.Shape != nil {
			t.Errorf("%v: absent buffer with bytes %d shape %v reason %q", b.ID, b.Bytes, b.Shape, b.Absent)
		}
		sum += b.Bytes
	}
	for _, s := range plan.Slabs {
		slabs += s.Bytes
	}
	if sum != plan.BufferBytes || slabs != plan.SlabBytes || plan.TotalBytes != sum+slabs {
		t.Errorf("BufferBytes %d (sum %d) SlabBytes %d (sum %d) TotalBytes %d",
			plan.BufferBytes, sum, plan.SlabBytes, slabs, plan.TotalBytes)
	}
}

func TestPlanOtherBuffersByHand(t *testing.T) {
	tests := []struct {
		file  string
		id    BufferID
		bytes int64 // 0: absent
	}{
		// llama: dense, attention, no SSM, no MoE.
		{"llama-3.1-8b.json", AttnOutput, 67108864},           // 8192 × 32·128 × 2
		{"llama-3.1-8b.json", SplitKWorkspace, 68157440},      // 256 rows × 32 heads × 16 splits × (128+2) × 4
		{"llama-3.1-8b.json", FFNActQ8, 117440512},            // 8192 × max(4096, 14336) × 1
		{"llama-3.1-8b.json", FFNActA, 234881024},             // 8192 × 14336 × 2
		{"llama-3.1-8b.json", FFNActScale, 32768},             // 8192 × 4
		{"llama-3.1-8b.json", FP8Act, 117440512},              // 8192 × 14336 × 1
		{"llama-3.1-8b.json", FP8ActScale, 3670016},           // 8192 × ⌈14336/128⌉ = 112 × 4
		{"llama-3.1-8b.json", NormUnitW, 28672},               // max(4096, 14336, 128) = 14336 × 2
		{"llama-3.1-8b.json", TokenIDs, 32768},                // 8192 × 4
		{"llama-3.1-8b.json", Scratch, 2099200},               // 256·4 + 256·4 + 256 × 32768/16 × 4
		{"llama-3.1-8b.json", GateLogits, 0},                  // no MoE
		{"llama-3.1-8b.json", SSMConvOutF32, 0},               // no SSM
		{"llama-3.1-8b.json", HCStreams, 0},                   // no hyper-connections
		{"llama-3.1-8b.json", LoRAXA, 0},                      // lora_max_rank 0
		{"llama-3.1-8b.json", Q2ActQ8, 0},                     // q2_prefill off
		{"mixtral-8x7b-v0.1.json", GateLogits, 131072},        // 8192 × 8 × 2
		{"mixtral-8x7b-v0.1.json", GateLogitsF32, 262144},     // 8192 × 8 × 4
		{"mixtral-8x7b-v0.1.json", MoERouterInF32, 134217728}, // 8192 × 4096 × 4
		{"mixtral-8x7b-v0.1.json", FFNActQ8, 0},               // E > 0
		// qwen3_next: GDN nk=16 dk=128 nv=32 dv=128.
		{"qwen3-next-80b-a3b-thinking.json", SSMDeinterleaved, 201326592}, // 8192 × 12288 × 2
		{"qwen3-next-80b-a3b-thinking.json", SSMBA, 1048576},              // 8192 × 2·32 × 2
		{"qwen3-next-80b-a3b-thinking.json", SSMGates, 2097152},           // 8192 × 32·2 × 4
		// Every layer is MoE: intermediate_size (5120) sizes nothing; experts and the shared expert are 512.
		{"qwen3-next-80b-a3b-thinking.json", FP8Act, 16777216},         // 8192 × max(H 2048, 512) × 1
		{"qwen3-next-80b-a3b-thinking.json", SSMConvOutF32, 268435456}, // 8192 × (2·16·128 + 32·128 = 8192) × 4
		// W + U + u_c = 3 × 8192·32·128 = 100663296; S = ⌈8192/64⌉=128 · 32·128·128 = 67108864; × 2
		{"qwen3-next-80b-a3b-thinking.json", GDNFLAScratch, 335544320},
		{"qwen3-next-80b-a3b-thinking.json", SplitKWorkspace, 67633152}, // 256 × 16 × 16 × (256+2) × 4
		{"qwen3-next-80b-a3b-thinking.json", SSDScratch, 0},
		// deepseek_v3 MLA.
		{"deepseek-v3.json", AttnOutput, 268435456},       // 8192 × 128·128 (v_head_dim) × 2
		{"deepseek-v3.json", SplitKWorkspace, 1077936128}, // 256 × 128 × 16 × (512+2) × 4
		{"deepseek-v3.json", FP8Act, 150994944},           // 8192 × max(7168, 18432) × 1
		// deepseek_v4 flash: grouped O and mHC.
		{"deepseek-v4-flash.json", OLatent, 134217728},    // 8192 × 8·1024 × 2
		{"deepseek-v4-flash.json", HCStreams, 268435456},  // 8192 × 4 × 4096 × 2
		{"deepseek-v4-flash.json", HCPost, 131072},        // 8192 × 4 × 4
		{"deepseek-v4-flash.json", HCComb, 524288},        // 8192 × 4 × 4 × 4
		{"deepseek-v4-flash.json", NormUnitW, 32768},      // hc_mult·H = 16384 × 2
		{"deepseek-v4-flash.json", AttnOutput, 536870912}, // 8192 × 64·512 × 2
		// nemotron_h 8B: d_inner 128·64 = 8192, n_groups 8, d_state 128, chunk 128.
		{"nemotron-h-8b-base-8k.json", SSMConvOutF32, 335544320}, // 8192 × (8192 + 2·8·128 = 10240) × 4
		// dt + dA = 2 × 128·8192; CB = 8·64·128·128 = 8388608; (2097152 + 8388608) × 4
		{"nemotron-h-8b-base-8k.json", SSDScratch, 41943040},
		{"nemotron-h-8b-base-8k.json", Scratch, 526336},            // 256·4 + 256·4 + 256 × 8192/16 × 4
		{"nemotron-h-8b-base-8k.json", SSMQKVZ, 0},                 // Mamba-2 is not GDN
		{"nemotron-3-nano-30b-a3b.json", SSMConvOutF32, 201326592}, // 8192 × (4096 + 2·8·128 = 6144) × 4
		{"nemotron-3-nano-30b-a3b.json", FP8Act, 30408704},         // 8192 × max(2688, 1856, shared 3712) × 1
	}
	for _, tt := range tests {
		_, plan := planExample(t, tt.file, Options{})
		b := plan.Buffers[tt.id]
		if b.Bytes != tt.bytes {
			t.Errorf("%s %v: %d B (%v %v, absent %q), want %d", tt.file, tt.id, b.Bytes, b.DType, b.Shape, b.Absent, tt.bytes)
		}
	}
}

func TestPlanOptionalBuffers(t *testing.T) {
	_, plan := planExample(t, "llama-3.1-8b.json", Options{LoRAMaxRank: 16, Q2Prefill: true})
	want := map[BufferID]int64{
		LoRAXA:           262144,    // 8192 × 16 × 2
		LoRADelta:        234881024, // 8192 × max(4096, 14336) × 2
		LoRAHAct:         234881024, // 8192 × 14336 × 2
		LoRASeqSlot:      32768,     // 8192 × 4
		Q2DequantScratch: 117440512, // 14336 × 4096 × 2
		Q2ActQ8:          133955584, // 8192 × ⌈14336/256⌉ = 56 × 292
	}
	for id, bytes := range want {
		if got := plan.Buffers[id].Bytes; got != bytes {
			t.Errorf("%v = %d, want %d", id, got, bytes)
		}
	}
	checkPlanInvariants(t, plan)
}

func TestPlanRowwiseSlab(t *testing.T) {
	_, plan := planExample(t, "qwen3-next-80b-a3b-thinking.json", Options{FP8Rowwise: true})
	// 36 GDN layers × (2048 × 12288 + 32·128 × 2048) × 2 = 36 × 33554432 × 2
	want := []SlabSpec{{Name: "ssm_rowwise_w_bf16", Bytes: 2415919104}}
	if len(plan.Slabs) != 1 || plan.Slabs[0] != want[0] || plan.SlabBytes != 2415919104 {
		t.Fatalf("slabs %+v SlabBytes %d, want %+v", plan.Slabs, plan.SlabBytes, want)
	}
	_, off := planExample(t, "qwen3-next-80b-a3b-thinking.json", Options{})
	if off.Slabs != nil || off.TotalBytes != plan.TotalBytes-2415919104 {
		t.Errorf("without fp8_rowwise: slabs %+v total %d", off.Slabs, off.TotalBytes)
	}
	checkPlanInvariants(t, plan)

	_, llama := planExample(t, "llama-3.1-8b.json", Options{FP8Rowwise: true})
	if llama.Slabs != nil || !hasNote(llama.Notes, "no GDN layers") {
		t.Errorf("llama with fp8_rowwise: slabs %+v notes %q", llama.Slabs, llama.Notes)
	}
}

func TestPlanGDNWithoutFLAHeads(t *testing.T) {
	cfg, err := ParseConfig(mutate(t, "qwen3-next-80b-a3b-thinking.json", map[string]string{"linear_value_head_dim": "64"}))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanFor(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b := plan.Buffers[GDNFLAScratch]; b.Present() || b.Absent != "GDN linear heads are not 128-dim" {
		t.Errorf("gdn_fla_scratch %+v", b)
	}
}

func TestPlanOptionsResolved(t *testing.T) {
	tests := []struct {
		file      string
		maxSeqLen int64
	}{
		{"llama-3.1-8b.json", 32768},         // min(131072, 32768)
		{"nemotron-h-8b-base-8k.json", 8192}, // min(8192, 32768)
		{"mixtral-8x7b-v0.1.json", 32768},    // min(32768, 32768)
	}
	for _, tt := range tests {
		_, plan := planExample(t, tt.file, Options{})
		got := plan.Options
		if got.KMax == nil || *got.KMax != 3 {
			t.Errorf("%s: k_max %v, want 3", tt.file, got.KMax)
		}
		got.KMax = nil // compared above: == would compare the pointer
		if want := (Options{MaxBatchTokens: 8192, MaxSeqLen: tt.maxSeqLen, KVBlockSize: 16, MaxBatchSize: 256,
			LogitsRows: LogitsAll, KVCacheDType: KVCacheAuto, MambaSSMCacheDType: SSMCacheAuto}); got != want {
			t.Errorf("%s: options %+v, want %+v", tt.file, got, want)
		}
	}
	cfg := loadExample(t, "llama-3.1-8b.json")
	cfg.MaxPositionEmbeddings = 0
	plan, err := PlanFor(cfg, Options{MaxBatchTokens: 512, MaxBatchSize: 8, MaxSeqLen: 100, KVBlockSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Options.MaxSeqLen != 100 || plan.Buffers[HiddenStates].Bytes != 512*4096*2 {
		t.Errorf("options %+v hidden %d", plan.Options, plan.Buffers[HiddenStates].Bytes)
	}
	// Rows 32 (8 < 32), width ⌈100/32⌉ = 4: 32·4 → 128 @0, 128 @256, 32·4·4 = 512 @512 → 1024.
	if plan.DecodeMeta.Bytes != 1024 || plan.Buffers[Scratch].Bytes != 1024 {
		t.Errorf("decode meta %+v", plan.DecodeMeta)
	}
	plan, err = PlanFor(cfg, Options{})
	if err != nil || plan.Options.MaxSeqLen != 32768 {
		t.Errorf("no max_position_embeddings: max_seq_len %d, %v; want 32768", plan.Options.MaxSeqLen, err)
	}
	plan, err = PlanFor(loadExample(t, "nemotron-h-8b-base-8k.json"), Options{MaxSeqLen: 16384, AllowLongMaxSeqLen: true})
	if err != nil || !hasNote(plan.Notes, "max_seq_len 16384 exceeds the model's limit of 8192 tokens (max_position_embeddings 8192): allowed by allow_long_max_seq_len") {
		t.Errorf("notes %q, %v", plan.Notes, err)
	}
}

func TestPlanOptionErrors(t *testing.T) {
	cfg := loadExample(t, "llama-3.1-8b.json")
	tests := []struct {
		opts   Options
		option string
	}{
		{Options{MaxBatchTokens: -1}, "max_batch_tokens"},
		{Options{MaxSeqLen: -1}, "max_seq_len"},
		{Options{KVBlockSize: -16}, "kv_block_size"},
		{Options{MaxBatchSize: -2}, "max_batch_size"},
		{Options{KMax: new(int64(-3))}, "k_max"},
		{Options{LoRAMaxRank: -8}, "lora_max_rank"},
		{Options{MaxBatchTokens: 128, MaxBatchSize: 256}, "max_batch_size"}, // 256 sequences > 128 tokens
		{Options{MaxBatchSize: MaxDecodeRows + 1}, "max_batch_size"},        // past the decode metadata maximum
	}
	for _, tt := range tests {
		_, err := PlanFor(cfg, tt.opts)
		var oe *OptionError
		if !errors.Is(err, ErrInvalidOption) || !errors.As(err, &oe) || oe.Option != tt.option {
			t.Errorf("PlanFor(%+v) err = %v, want *OptionError for %s", tt.opts, err, tt.option)
		}
	}
}

// k_max: unset is the default 3, a set 0 is no speculative decoding (the
// expert rows are M's alone), a set value is taken as given; the plan keeps
// its own copy.
func TestPlanKMax(t *testing.T) {
	cfg := loadExample(t, "deepseek-v3.json")
	// M = 2, so k2 = max(k_max, M) shows k_max. expert_gate_out is [k2·K, Im] BF16.
	rowBytes := cfg.NumExpertsPerTok * cfg.MoEIntermediateSize * 2
	tests := []struct {
		name   string
		kMax   *int64
		want   int64 // resolved k_max
		wantK2 int64
	}{
		{"unset is 3", nil, 3, 3},
		{"0 is no speculative decoding", new(int64(0)), 0, 2},
		{"1 is below M", new(int64(1)), 1, 2},
		{"5", new(int64(5)), 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := PlanFor(cfg, Options{MaxBatchTokens: 2, KMax: tt.kMax})
			if err != nil {
				t.Fatal(err)
			}
			if k := plan.Options.KMax; k == nil || *k != tt.want || (tt.kMax != nil && k == tt.kMax) {
				t.Fatalf("resolved k_max %v (%p, given %p), want %d in a copy of its own", k, k, tt.kMax, tt.want)
			}
			if got := plan.Buffers[ExpertGateOut].Bytes; got != tt.wantK2*rowBytes {
				t.Errorf("expert_gate_out %d B, want k2 %d × %d B", got, tt.wantK2, rowBytes)
			}
		})
	}
}

// An unset max_batch_size defaults to min(256, max_batch_tokens).
func TestDefaultMaxBatchSizeFollowsMaxBatchTokens(t *testing.T) {
	p, err := PlanFor(loadExample(t, "llama-3.1-8b.json"), Options{MaxBatchTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	if p.Options.MaxBatchSize != 128 {
		t.Fatalf("max_batch_size = %d, want 128", p.Options.MaxBatchSize)
	}
}

func TestPlanOverflow(t *testing.T) {
	// ParseConfig refuses a vocab_size past int32; a config built in code
	// may still have one.
	cfg := loadExample(t, "llama-3.1-8b.json")
	cfg.VocabSize = 1 << 62
	_, err := PlanFor(cfg, Options{})
	var oe *OverflowError
	if !errors.Is(err, ErrOverflow) || !errors.As(err, &oe) || oe.What != "logits" {
		t.Fatalf("err = %v, want *OverflowError naming logits", err)
	}
	_, err = PlanFor(loadExample(t, "llama-3.1-8b.json"), Options{MaxBatchTokens: 1 << 62})
	if !errors.As(err, &oe) || oe.What != "hidden_states" {
		t.Fatalf("err = %v, want *OverflowError naming hidden_states", err)
	}
}

func TestPlanForBadModelConfig(t *testing.T) {
	if _, err := PlanFor(nil, Options{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("PlanFor(nil) err = %v", err)
	}
	cfg := loadExample(t, "nemotron-h-8b-base-8k.json")
	cfg.Mamba.ChunkSize = 0
	var ce *ConfigError
	if _, err := PlanFor(cfg, Options{}); !errors.As(err, &ce) || ce.Field != "chunk_size" {
		t.Errorf("chunk_size 0: err = %v", err)
	}
	if _, err := PlanFor(&ModelConfig{}, Options{}); !errors.As(err, &ce) || ce.Field != "hidden_size" {
		t.Errorf("empty ModelConfig: err = %v", err)
	}
}
