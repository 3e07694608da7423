package arena

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

// within reports whether got is within tol (a fraction) of want.
func within(got, want int64, tol float64) bool {
	return math.Abs(float64(got)-float64(want)) <= tol*float64(want)
}

// TestWeightsMatchPublishedCounts checks parameter counts against what each
// model's publisher states, within 3%. Publishers count "active" two ways:
// Mistral and Qwen count the input embedding (ActiveParams); OpenAI and
// NVIDIA do not (ActiveParamsExclEmbedding, which keeps the LM head). Totals
// exclude MTP layers, as DeepSeek states 671B for V3 (685B with its 14B MTP
// module). Sources: the Hugging Face model cards; gpt-oss: OpenAI's model
// card table (116.83B / 5.13B, 20.91B / 3.61B); Nemotron 3 Nano: NVIDIA's
// release ("3.2B active (3.6B with embeddings), 31.6B total");
// DeepSeek-V4: DeepSeek's release (Flash 284B / 13B, Pro 1.6T / 49B).
func TestWeightsMatchPublishedCounts(t *testing.T) {
	const (
		none    = 0
		incl    = 1 // compare ActiveParams
		exclEmb = 2 // compare ActiveParamsExclEmbedding
	)
	tests := []struct {
		file          string
		total, active int64
		activeKind    int
	}{
		{"llama-3.1-8b.json", 8_030_000_000, 0, none},
		{"qwen3-8b.json", 8_190_000_000, 0, none},
		// "0.6B": 596.05M counted, the head tied to the embedding.
		{"qwen3-0.6b.json", 600_000_000, 0, none},
		{"qwen3-32b.json", 32_800_000_000, 0, none},
		{"qwen3-30b-a3b.json", 30_500_000_000, 3_300_000_000, incl},
		{"mixtral-8x7b-v0.1.json", 46_700_000_000, 12_900_000_000, incl},
		// Qwen states "80B total, 3B activated". The 3B is the name's
		// rounding: no way of counting gives it within 3% (we compute 3.88B
		// with embeddings, 3.56B without the input embedding, 3.25B without
		// embedding and LM head). The active figure is checked exactly in
		// TestWeightsQwen3NextActive instead.
		{"qwen3-next-80b-a3b-thinking.json", 80_000_000_000, 0, none},
		// 37B active counts the embedding: 37.55B (1.5%); 36.63B without it.
		{"deepseek-v3.json", 671_000_000_000, 37_000_000_000, incl},
		{"gpt-oss-120b.json", 116_830_000_000, 5_130_000_000, exclEmb},
		{"gpt-oss-20b.json", 20_910_000_000, 3_610_000_000, exclEmb},
		// "8B" and "56B" are the names; NVIDIA gives no finer figure.
		{"nemotron-h-8b-base-8k.json", 8_000_000_000, 0, none},
		{"nemotron-h-56b-base-8k.json", 56_000_000_000, 0, none},
		{"nemotron-3-nano-30b-a3b.json", 31_600_000_000, 3_200_000_000, exclEmb},
		// 284.3B without the MTP layer (292.0B with it); 13.27B active
		// without the input embedding (2.1% over 13B), 13.80B with it.
		{"deepseek-v4-flash.json", 284_000_000_000, 13_000_000_000, exclEmb},
		// 1573B without the MTP layer (1.7% under 1.6T; 1600.7B with it);
		// 48.85B active without the input embedding, 49.78B with it.
		{"deepseek-v4-pro.json", 1_600_000_000_000, 49_000_000_000, exclEmb},
		// 106.85B (0.8% over 106B). "12B active" matches no way of counting
		// within 3% (13.42B with embeddings, 12.80B without the input
		// embedding, 12.18B without it and lm_head); the active figure is
		// checked exactly in TestGLM4MoEWeightsByHand instead.
		{"glm-4.5-air.json", 106_000_000_000, 0, none},
		// Google: "27B"; 27.43B counted (1.6% over), of which 0.42B are
		// the SigLIP tower and projector. Active is checked exactly in
		// TestGemma3WeightsByHand.
		{"gemma-3-27b-it.json", 27_000_000_000, 0, none},
		// Qwen: 8.29B ("7B" is the language model's class).
		{"qwen2.5-vl-7b-instruct.json", 8_290_000_000, 0, none},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		r, err := EstimateWeights(loadExample(t, tt.file), WeightOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if !within(r.TotalParams, tt.total, 0.03) {
			t.Errorf("%s: total %d params, published %d (%.1f%% off)", tt.file, r.TotalParams, tt.total,
				100*(float64(r.TotalParams)/float64(tt.total)-1))
		}
		active := r.ActiveParams
		if tt.activeKind == exclEmb {
			active = r.ActiveParamsExclEmbedding
		}
		if tt.activeKind != none && !within(active, tt.active, 0.03) {
			t.Errorf("%s: active %d params, published %d (%.1f%% off)", tt.file, active, tt.active,
				100*(float64(active)/float64(tt.active)-1))
		}
		checkWeightInvariants(t, tt.file, r)
	}
	for _, p := range exampleConfigs(t) {
		if name := p[strings.LastIndex(p, "/")+1:]; !seen[name] {
			t.Errorf("%s has no published-count check", name)
		}
	}
}

// checkWeightInvariants: totals are the sums of the tensors, groups add up,
// active ≤ total, bytes positive.
func checkWeightInvariants(t *testing.T, name string, r *WeightReport) {
	t.Helper()
	var params, active, bytes, gp int64
	for _, x := range r.Tensors {
		params += x.Params
		active += x.ActiveParams
		bytes += x.Bytes
		if x.Params <= 0 || x.Bytes <= 0 || x.ActiveCount > x.Count {
			t.Errorf("%s: bad tensor %+v", name, x)
		}
	}
	if r.MTPIncluded {
		for _, x := range r.MTPTensors {
			params += x.Params
			active += x.ActiveParams
			bytes += x.Bytes
		}
	}
	for _, g := range r.Groups {
		gp += g.Params
	}
	if params != r.TotalParams || active != r.ActiveParams || bytes != r.Bytes || gp != r.TotalParams {
		t.Errorf("%s: sums %d %d %d (groups %d) vs report %d %d %d", name, params, active, bytes, gp,
			r.TotalParams, r.ActiveParams, r.Bytes)
	}
	if r.ActiveParams > r.TotalParams || r.ActiveParamsExclEmbedding > r.ActiveParams {
		t.Errorf("%s: active %d, excl %d, total %d", name, r.ActiveParams, r.ActiveParamsExclEmbedding, r.TotalParams)
	}
}

// TestWeightsLlamaByHand: Llama-3.1-8B, all bf16, untied.
func TestWeightsLlamaByHand(t *testing.T) {
	r, err := EstimateWeights(loadExample(t, "llama-3.1-8b.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// embed_tokens and lm_head: 2 × 128256 × 4096 = 1,050,673,152.
	// Per layer: q 4096·4096 + k, v 2 × 4096·1024 + o 4096·4096 = 41,943,040;
	// MLP 3 × 4096·14336 = 176,160,768; two norms 8192 → 218,112,000 × 32 =
	// 6,979,584,000; final norm 4096.
	const params = 1_050_673_152 + 6_979_584_000 + 4096
	if r.TotalParams != params || r.ActiveParams != params || r.Bytes != 2*params || r.DType != WeightBF16 {
		t.Errorf("total %d active %d bytes %d dtype %v; want %d, %d, %d, bf16", r.TotalParams, r.ActiveParams, r.Bytes, r.DType,
			params, params, 2*params)
	}
	if r.ActiveParamsExclEmbedding != params-525_336_576 || r.EmbeddingParams != 525_336_576 {
		t.Errorf("excl embedding %d, embedding %d", r.ActiveParamsExclEmbedding, r.EmbeddingParams)
	}
	want := map[string]int64{"embedding": 525_336_576, "norms": 266_240, "attention": 1_342_177_280,
		"mlp": 5_637_144_576, "lm_head": 525_336_576}
	for _, g := range r.Groups {
		if g.Params != want[g.Name] {
			t.Errorf("group %s: %d params, want %d", g.Name, g.Params, want[g.Name])
		}
		delete(want, g.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing groups %v", want)
	}
}

// TestWeightsQwen3NextActive: gated attention q_proj [H, 2·Hq·D], GDN, 512
// experts top-10 plus a shared expert and its gate.
func TestWeightsQwen3NextActive(t *testing.T) {
	r, err := EstimateWeights(loadExample(t, "qwen3-next-80b-a3b-thinking.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := findTensor(t, r.Tensors, "layers.self_attn.q_proj")
	if q.Shape[0] != 2048 || q.Shape[1] != 2*16*256 || q.Count != 12 {
		t.Errorf("gated q_proj %+v", q)
	}
	qkvz := findTensor(t, r.Tensors, "layers.linear_attn.in_proj_qkvz")
	if qkvz.Shape[1] != 2*16*128+2*32*128 || qkvz.Count != 36 {
		t.Errorf("in_proj_qkvz %+v", qkvz)
	}
	conv := findTensor(t, r.Tensors, "layers.linear_attn.conv1d")
	if conv.Shape[0] != 2*16*128+32*128 || conv.Shape[1] != 4 {
		t.Errorf("conv1d %+v", conv)
	}
	// Per MoE layer and token: 10 routed + 1 shared expert of 3 × 2048 × 512
	// = 3,145,728 each = 34,603,008, router 512 × 2048 = 1,048,576, shared
	// gate 2048 → 35,653,632 × 48 = 1,711,374,336. Attention 12 ×
	// (2048·8192 + 2 × 2048·512 + 4096·2048 + 2 × 256) = 327,161,856. GDN 36 ×
	// (2048·12288 + 2048·64 + 8192·4 + 2 × 32 + 128 + 4096·2048) = 1,213,864,704.
	// Norms 96 × 2048 + 2048 = 198,656. Embedding and lm_head 151936 × 2048
	// = 311,164,928 each.
	const active = 1_711_374_336 + 327_161_856 + 1_213_864_704 + 198_656 + 2*311_164_928
	if r.ActiveParams != active || r.ActiveParamsExclEmbedding != active-311_164_928 {
		t.Errorf("active %d (excl embedding %d), want %d", r.ActiveParams, r.ActiveParamsExclEmbedding, active)
	}
}

// TestWeightsQuantized: gpt-oss mxfp4 experts as the checkpoint stores
// them (TestMXFP4Padding sizes them as vLLM holds them), DeepSeek-V3 fp8
// blocks, DeepSeek-V4 fp4 experts with fp8 projections.
func TestWeightsQuantized(t *testing.T) {
	stored := WeightOptions{CheckpointLayout: true}
	oss, err := EstimateWeights(loadExample(t, "gpt-oss-120b.json"), stored)
	if err != nil {
		t.Fatal(err)
	}
	// One expert: gate_up [2880, 5760] mxfp4 = 5760 rows × ⌈2880/32⌉ = 90
	// blocks × 17 B = 8,812,800; down [2880, 2880] = 4,406,400; biases
	// (5760 + 2880) × 2 B = 17,280 → 13,236,480 × 128 experts × 36 layers.
	g := findGroup(t, oss.Groups, "moe_experts")
	if g.Bytes != 13_236_480*128*36 {
		t.Errorf("gpt-oss-120b experts %d B, want %d", g.Bytes, 13_236_480*128*36)
	}
	// The rest is bf16: embed + lm_head 2 × 201088 × 2880, attention 36 ×
	// 26,550,144 (q/k/v/o, their biases, 64 sinks), router 36 × (2880·128 +
	// 128), norms 73 × 2880 = 2,127,557,952 params.
	if want := int64(13_236_480*128*36 + 2*2_127_557_952); oss.Bytes != want {
		t.Errorf("gpt-oss-120b %d B, want %d", oss.Bytes, want)
	}
	// OpenAI's model card: checkpoint 60.8 GiB (120b), 12.8 GiB (20b).
	oss20, err := EstimateWeights(loadExample(t, "gpt-oss-20b.json"), stored)
	if err != nil {
		t.Fatal(err)
	}
	if !within(oss.Bytes, 608*(1<<30)/10, 0.01) || !within(oss20.Bytes, 128*(1<<30)/10, 0.01) {
		t.Errorf("gpt-oss checkpoints %d, %d B; card 60.8 GiB, 12.8 GiB", oss.Bytes, oss20.Bytes)
	}
	if !hasNote(oss.Notes, "torch_dtype is absent") || oss.EnginePaddingBytes != 0 || oss.CheckpointBytes != oss.Bytes {
		t.Errorf("notes %q, padding %d B, checkpoint %d B", oss.Notes, oss.EnginePaddingBytes, oss.CheckpointBytes)
	}

	v3, err := EstimateWeights(loadExample(t, "deepseek-v3.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// q_b_proj [1536, 24576] fp8: 37,748,736 B + ⌈1536/128⌉·⌈24576/128⌉ = 12 ×
	// 192 scales × 4 B = 9,216 → 37,757,952 × 61 layers.
	qb := findTensor(t, v3.Tensors, "layers.self_attn.q_b_proj")
	if qb.Format != WeightFP8Block || qb.Bytes != 37_757_952*61 {
		t.Errorf("q_b_proj %+v", qb)
	}
	for name, f := range map[string]WeightFormat{"embed_tokens": WeightBF16, "lm_head": WeightBF16, "layers.mlp.gate": WeightBF16,
		"layers.mlp.gate.e_score_correction_bias": WeightF32, "layers.input_layernorm": WeightBF16,
		"layers.mlp.experts.down_proj": WeightFP8Block, "layers.mlp.shared_experts.up_proj": WeightFP8Block} {
		if x := findTensor(t, v3.Tensors, name); x.Format != f {
			t.Errorf("deepseek-v3 %s: %v, want %v", name, x.Format, f)
		}
	}

	v4, err := EstimateWeights(loadExample(t, "deepseek-v4-flash.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// w2 [2048, 4096] mxfp4: 4096 × 64 blocks × 17 B = 4,456,448 per expert
	// × 256 experts × 43 layers.
	w2 := findTensor(t, v4.Tensors, "layers.ffn.experts.down_proj")
	if w2.Format != WeightMXFP4 || w2.Bytes != 4_456_448*256*43 || w2.ActiveCount != 6*43 {
		t.Errorf("v4 experts down %+v", w2)
	}
	// wo_a: 8 groups of [64·512/8 = 4096 → 1024]: [4096, 8192], fp8.
	woa := findTensor(t, v4.Tensors, "layers.attn.wo_a")
	if woa.Format != WeightFP8Block || woa.Shape[0] != 4096 || woa.Shape[1] != 8192 {
		t.Errorf("wo_a %+v", woa)
	}
	// Hash layers route by tid2eid [V, K] i32; the other 40 have a bias.
	if x := findTensor(t, v4.Tensors, "layers.ffn.gate.tid2eid"); x.Count != 3 || x.Format != WeightI32 || !x.Lookup {
		t.Errorf("tid2eid %+v", x)
	}
	if x := findTensor(t, v4.Tensors, "layers.ffn.gate.e_score_correction_bias"); x.Count != 40 {
		t.Errorf("e_score_correction_bias %+v", x)
	}
	// Compressors by ratio: 21 ratio-4 (coff 2) and 20 ratio-128 layers; the
	// indexer and its compressor on ratio-4 layers only.
	if x := findTensor(t, v4.Tensors, "layers.attn.compressor[ratio 4].wkv_wgate"); x.Count != 21 || x.Shape[1] != 2*2*512 {
		t.Errorf("ratio-4 compressor %+v", x)
	}
	if x := findTensor(t, v4.Tensors, "layers.attn.compressor[ratio 128].ape"); x.Count != 20 || x.Shape[0] != 128 || x.Shape[1] != 512 {
		t.Errorf("ratio-128 ape %+v", x)
	}
	if x := findTensor(t, v4.Tensors, "layers.attn.indexer.wq_b"); x.Count != 21 || x.Shape[1] != 64*128 {
		t.Errorf("indexer wq_b %+v", x)
	}
	// Hyper-connections: (2 + 4)·4 = 24 rows of 4 × 4096, F32, twice per layer.
	if x := findTensor(t, v4.Tensors, "layers.hc_attn_fn"); x.Format != WeightF32 || x.Shape[0] != 24 || x.Shape[1] != 16384 {
		t.Errorf("hc_attn_fn %+v", x)
	}
}

// TestWeightsMTP: DeepSeek-V3's MTP layer is reported apart and counted
// only with IncludeMTP; with it the total is Hugging Face's 685B.
func TestWeightsMTP(t *testing.T) {
	cfg := loadExample(t, "deepseek-v3.json")
	r, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// embed_tokens + shared_head.head 2 × 926,679,040; eh_proj 14336 × 7168
	// = 102,760,448; 5 norms of 7168; MLA 187,107,328; MoE: router
	// 1,835,008 + bias 256, 257 experts of 44,040,192.
	const mtp = 2*926_679_040 + 102_760_448 + 5*7168 + 187_107_328 + 1_835_008 + 256 + 257*44_040_192
	if r.MTPLayers != 1 || r.MTPParams != mtp || r.MTPIncluded || !hasNote(r.Notes, "not counted") {
		t.Errorf("mtp layers %d params %d (want %d) included %v notes %q", r.MTPLayers, r.MTPParams, mtp, r.MTPIncluded, r.Notes)
	}
	with, err := EstimateWeights(cfg, WeightOptions{IncludeMTP: true})
	if err != nil {
		t.Fatal(err)
	}
	if with.TotalParams != r.TotalParams+mtp || with.Bytes != r.Bytes+r.MTPBytes || !with.MTPIncluded ||
		with.Groups[len(with.Groups)-1].Name != "mtp" || !within(with.TotalParams, 685_000_000_000, 0.01) {
		t.Errorf("with MTP: total %d bytes %d", with.TotalParams, with.Bytes)
	}
	checkWeightInvariants(t, "deepseek-v3+mtp", with)
	// Models without num_nextn_predict_layers have none.
	if l, err := EstimateWeights(loadExample(t, "llama-3.1-8b.json"), WeightOptions{IncludeMTP: true}); err != nil || l.MTPLayers != 0 || l.MTPIncluded {
		t.Errorf("llama MTP: %+v, %v", l, err)
	}
}

// TestWeightsDTypeOverride: bf16/f32 size everything, fp8 quantizes the
// projections with 128×128 blocks.
func TestWeightsDTypeOverride(t *testing.T) {
	oss := loadExample(t, "gpt-oss-120b.json")
	for dt, size := range map[DType]int64{BF16: 2, F32: 4} {
		r, err := EstimateWeights(oss, WeightOptions{DType: dt})
		if err != nil || r.Bytes != size*r.TotalParams {
			t.Errorf("gpt-oss %v: %d B for %d params, %v", dt, r.Bytes, r.TotalParams, err)
		}
	}
	r, err := EstimateWeights(loadExample(t, "llama-3.1-8b.json"), WeightOptions{DType: FP8})
	if err != nil {
		t.Fatal(err)
	}
	// Per layer, fp8 values + 4 B per 128×128 block: q and o 16,777,216 +
	// 4096 each; k and v 4,194,304 + 1024 each; gate and up 58,720,256 +
	// 14,336 each; down the same → 218,157,056 × 32 = 6,981,025,792. Norms
	// (65 × 4096) and embed + lm_head (2 × 525,336,576) in bf16.
	if want := int64(6_981_025_792 + 2*65*4096 + 2*2*525_336_576); r.Bytes != want {
		t.Errorf("llama fp8: %d B, want %d", r.Bytes, want)
	}
	if _, err := EstimateWeights(loadExample(t, "llama-3.1-8b.json"), WeightOptions{DType: I8}); !isOption(err, "weight_dtype") {
		t.Errorf("i8: err = %v", err)
	}
	if _, err := EstimateWeights(nil, WeightOptions{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil cfg: err = %v", err)
	}
}

// TestWeightsTiedEmbeddings: tie_word_embeddings drops lm_head.
func TestWeightsTiedEmbeddings(t *testing.T) {
	untied, err := EstimateWeights(loadExample(t, "qwen3-8b.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(mutate(t, "qwen3-8b.json", map[string]string{"tie_word_embeddings": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	tied, err := EstimateWeights(cfg, WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if untied.TotalParams-tied.TotalParams != 151936*4096 || !hasNote(tied.Notes, "tie_word_embeddings") {
		t.Errorf("tied %d, untied %d", tied.TotalParams, untied.TotalParams)
	}
	for _, x := range tied.Tensors {
		if x.Name == "lm_head" {
			t.Error("tied model has an lm_head tensor")
		}
	}
}

// TestWeightsNemotronRelu2: Nemotron-H MLPs and experts have no gate_proj.
func TestWeightsNemotronRelu2(t *testing.T) {
	r, err := EstimateWeights(loadExample(t, "nemotron-3-nano-30b-a3b.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range r.Tensors {
		if strings.HasSuffix(x.Name, "gate_proj") {
			t.Errorf("relu2 MLP has %s", x.Name)
		}
	}
	// in_proj [2688, 2·4096 + 2·8·128 + 64 = 10304]; one expert 2 × 2688 ×
	// 1856 = 9,977,856 params; shared 2 × 2688 × 3712.
	if x := findTensor(t, r.Tensors, "layers.mixer.in_proj"); x.Shape[1] != 10304 || x.Count != 23 {
		t.Errorf("in_proj %+v", x)
	}
	if g := findGroup(t, r.Groups, "moe_experts"); g.Params != 9_977_856*128*23 || g.ActiveParams != 9_977_856*6*23 {
		t.Errorf("experts %+v", g)
	}
}

// TestWeightReportJSON: snake_case keys, format names, [] for empty lists.
func TestWeightReportJSON(t *testing.T) {
	r, err := EstimateWeights(loadExample(t, "llama-3.1-8b.json"), WeightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"total_params", "active_params", "active_params_excl_embedding", "bytes", "tensors", "groups", "notes", "mtp_included"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no key %q in %s", k, b)
		}
	}
	if m["dtype"] != "bf16" || !strings.Contains(string(b), `"format":"bf16"`) {
		t.Errorf("formats not named: %.200s", b)
	}
	if b, err := json.Marshal(WeightReport{}); err != nil || !strings.Contains(string(b), `"tensors":[]`) {
		t.Errorf("empty report %s, %v", b, err)
	}
}

// findTensor returns the tensor called name.
func findTensor(t *testing.T, ts []WeightTensor, name string) WeightTensor {
	t.Helper()
	for _, x := range ts {
		if x.Name == name {
			return x
		}
	}
	t.Fatalf("no tensor %q", name)
	return WeightTensor{}
}

// findGroup returns the group called name.
func findGroup(t *testing.T, gs []WeightGroup, name string) WeightGroup {
	t.Helper()
	for _, g := range gs {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no group %q", name)
	return WeightGroup{}
}

// isOption reports whether err is an *OptionError for option.
func isOption(err error, option string) bool {
	var oe *OptionError
	return errors.Is(err, ErrInvalidOption) && errors.As(err, &oe) && oe.Option == option
}
