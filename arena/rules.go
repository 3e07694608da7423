package arena

// bufferShape is what a rule returns: a dtype and a shape in elements
// (outermost first), or the reason the buffer is absent.
type bufferShape struct {
	dtype  DType
	dims   []int64
	absent string
}

// shape is a present buffer of dtype dt and the given dims.
func shape(dt DType, dims ...int64) bufferShape { return bufferShape{dtype: dt, dims: dims} }

// absent is a buffer the model does not need, and why.
func absent(reason string) bufferShape { return bufferShape{absent: reason} }

// rule sizes one buffer.
type rule func(p *planner) bufferShape

// Tunables of the rules whose values no config field gives.
const (
	// SplitKNumSplits is how many KV splits the split-K decode attention
	// kernel reduces (flash-decoding; FlashMLA's num_splits plays the same role).
	SplitKNumSplits = 16
	// FLAChunkSize is the chunk length of flash-linear-attention's chunked
	// gated delta rule (chunk_gated_delta_rule, BT = 64).
	FLAChunkSize = 64
	// FLAHeadDim is the linear head size the FLA chunked prefill kernels are
	// built for here; gdn_fla_scratch exists only when dk = dv = FLAHeadDim.
	FLAHeadDim = 128
	// FP8BlockSize is the activation block that shares one F32 scale
	// (DeepSeek-V3's 1×128 tile-wise FP8 activation quantization).
	FP8BlockSize = 128
	// Q8KBlockSize and Q8KBlockBytes are llama.cpp's block_q8_K: 256 int8
	// values, one f32 scale and 16 int16 partial sums = 4 + 256 + 32 bytes.
	Q8KBlockSize  = 256
	Q8KBlockBytes = 292
)

// traits are a buffer's properties that no model changes: what a build must
// do with the buffer besides allocating it. The zero value is a buffer that
// is only allocated.
type traits struct {
	// zeroFill: the build zero-fills the buffer after allocating it, before
	// the first forward step (BufferID.ZeroFill).
	zeroFill bool
}

// bufferTraits is the buffer table's second column: each BufferID's traits,
// the zero value for a buffer not listed.
var bufferTraits = [NumBuffers]traits{
	// design.md §5: "[max_dim] BF16, zero-filled after allocation".
	NormUnitW: {zeroFill: true},
}

// ZeroFill reports whether a build must zero-fill the buffer after
// allocating it, before the first forward step (design.md §5: norm_unit_w),
// when the plan has it present. It is a property of the buffer, not of the
// model; false for an id ≥ NumBuffers.
func (id BufferID) ZeroFill() bool { return id < NumBuffers && bufferTraits[id].zeroFill }

// rules is the buffer table of design.md §5: one rule per BufferID.
// M = max_batch_tokens, H = hidden_size, D = head_dim, etc. as in §5.
var rules = [NumBuffers]rule{
	// [M, H] BF16, always.
	HiddenStates: hiddenRows,
	Residual:     hiddenRows,
	NormOutput:   hiddenRows,
	MoEOutput:    hiddenRows,

	// [M, qkvWidth] BF16; see attention.qkvWidth for each attention kind.
	QKVOutput: func(p *planner) bufferShape {
		if !p.hasAttention() {
			return absent("no attention layers")
		}
		return shape(BF16, p.m(), p.qkvWidth())
	},
	// [M, Hq·D] BF16 (MLA: Hq·v_head_dim, o_proj's input).
	AttnOutput: func(p *planner) bufferShape {
		if !p.hasAttention() {
			return absent("no attention layers")
		}
		return shape(BF16, p.m(), p.attnOutWidth())
	},

	// [M, E] BF16 / F32 router logits, MoE only.
	GateLogits: func(p *planner) bufferShape {
		if !p.hasMoE() {
			return absent("no MoE layers")
		}
		return shape(BF16, p.m(), p.cfg.NumExperts)
	},
	GateLogitsF32: func(p *planner) bufferShape {
		if !p.hasMoE() {
			return absent("no MoE layers")
		}
		return shape(F32, p.m(), p.cfg.NumExperts)
	},
	// [M, H] F32: the router's input upcast to F32, MoE only.
	MoERouterInF32: func(p *planner) bufferShape {
		if !p.hasMoE() {
			return absent("no MoE layers")
		}
		return shape(F32, p.m(), p.h())
	},

	// [rows, V] BF16, always: rows = M with logits_rows "all" (a row per
	// token), min(M, max_batch_size·(1 + k_max)) with "sampled" (a row per
	// sampled position: vLLM's gpu_model_runner computes logits for
	// logits_indices only).
	Logits: func(p *planner) bufferShape { return shape(BF16, p.opts.logitsRows(&p.sizer), p.cfg.VocabSize) },

	// [M, 2·nk·dk + 2·nv·dv] BF16: in_proj_qkvz output and its de-interleaved
	// copy (modeling_qwen3_next.py fix_query_key_value_ordering), GDN only.
	SSMQKVZ:          gdnQKVZRows,
	SSMDeinterleaved: gdnQKVZRows,
	// [M, 2·nv] BF16: in_proj_ba output (b and a per value head), GDN only.
	SSMBA: func(p *planner) bufferShape {
		if !p.hasGDN() {
			return absent("no GDN layers")
		}
		return shape(BF16, p.m(), p.mul(2, p.shape.gdn.NumValueHeads))
	},
	// [M, 2·nv] F32: the decay gate g = −exp(A_log)·softplus(a + dt_bias) and
	// beta = sigmoid(b), one of each per token and value head
	// (modeling_qwen3_next.py, Qwen3NextGatedDeltaNet.forward), GDN only.
	// design.md §5 writes [nv·2], which holds one token: prefill needs a row
	// per token.
	SSMGates: func(p *planner) bufferShape {
		if !p.hasGDN() {
			return absent("no GDN layers")
		}
		return shape(F32, p.m(), p.mul(2, p.shape.gdn.NumValueHeads))
	},
	// [M, conv_dim] F32, the causal conv1d output. GDN (modeling_qwen3_next.py
	// conv_dim): 2·nk·dk + nv·dv; Mamba-2 (modeling_nemotron_h.py conv_dim):
	// d_inner + 2·n_groups·d_state. The max when a model had both.
	SSMConvOutF32: func(p *planner) bufferShape {
		var w int64
		if p.hasGDN() {
			w = p.shape.gdn.convDim(&p.sizer)
		}
		if p.hasMamba() {
			w = max(w, p.shape.mamba.convDim(&p.sizer))
		}
		if w == 0 {
			return absent("no SSM (GDN or Mamba-2) layers")
		}
		return shape(F32, p.m(), w)
	},

	// [DecodeMeta.Bytes] U8: the decode metadata (positions, slot_mapping,
	// block_tables) laid out by NewDecodeMetaLayout, always.
	Scratch: func(p *planner) bufferShape { return shape(U8, p.meta.Bytes) },

	// [k2·K, Im] BF16 with k2 = max(k_max, M): each routed token's expert
	// gate and up outputs; [k2·K, H] BF16: its down output. MoE only.
	ExpertGateOut: func(p *planner) bufferShape { return expertRows(p, p.cfg.MoEIntermediateSize) },
	ExpertUpOut:   func(p *planner) bufferShape { return expertRows(p, p.cfg.MoEIntermediateSize) },
	ExpertDownOut: func(p *planner) bufferShape { return expertRows(p, p.h()) },

	// [rows, Hq, SplitKNumSplits, Dv + 2] F32: flash-decoding split-K partials,
	// per split an output accumulator of Dv (planner.decodeValueDim) plus the
	// running max and sum of its softmax; rows = DecodeMeta.Rows. Attention only.
	SplitKWorkspace: func(p *planner) bufferShape {
		if !p.hasAttention() {
			return absent("no attention layers")
		}
		return shape(F32, p.meta.Rows, p.cfg.NumAttentionHeads, SplitKNumSplits, p.add(p.decodeValueDim(), 2))
	},

	// [M, o_groups·o_lora_rank] BF16: the grouped O-projection's first stage
	// (vLLM deepseek_v4.py wo_a), DeepSeek-V4 only.
	OLatent: func(p *planner) bufferShape {
		if p.shape.oGroups == 0 {
			return absent("no grouped O-projection (o_groups)")
		}
		return shape(BF16, p.m(), p.mul(p.shape.oGroups, p.shape.oLoRARank))
	},

	// [max_dim] BF16 of ones for weightless norms; max_dim is planner.normDim.
	NormUnitW: func(p *planner) bufferShape { return shape(BF16, p.normDim()) },

	// Hyper-connections (mHC, DeepSeek-V4): [M, hc_mult, H] BF16 streams,
	// [M, hc_mult] F32 post weights, [M, hc_mult, hc_mult] F32 combination matrix.
	HCStreams: func(p *planner) bufferShape {
		if n := hcMult(p); n > 0 {
			return shape(BF16, p.m(), n, p.h())
		}
		return absent("no hyper-connections (hc_mult)")
	},
	HCPost: func(p *planner) bufferShape {
		if n := hcMult(p); n > 0 {
			return shape(F32, p.m(), n)
		}
		return absent("no hyper-connections (hc_mult)")
	},
	HCComb: func(p *planner) bufferShape {
		if n := hcMult(p); n > 0 {
			return shape(F32, p.m(), n, n)
		}
		return absent("no hyper-connections (hc_mult)")
	},

	// Chunked-prefill scratch of flash-linear-attention's chunk_gated_delta_rule
	// (chunk FLAChunkSize = 64, q/k repeated to nv heads as Qwen3-Next does),
	// BF16 like FLA's k.new_empty, laid out flat as
	//   W   [M, nv, dk]            (recompute_w_u_fwd w)
	//   U   [M, nv, dv]            (recompute_w_u_fwd u)
	//   S   [⌈M/64⌉, nv, dk, dv]   (chunk_gated_delta_rule_fwd_h h, per-chunk states)
	//   u_c [M, nv, dv]            (chunk_gated_delta_rule_fwd_h v_new)
	// GDN with dk = dv = 128 only.
	GDNFLAScratch: func(p *planner) bufferShape {
		if !p.hasGDN() {
			return absent("no GDN layers")
		}
		g := p.shape.gdn
		if g.KeyHeadDim != FLAHeadDim || g.ValueHeadDim != FLAHeadDim {
			return absent("GDN linear heads are not 128-dim")
		}
		nv, dk, dv, m := g.NumValueHeads, g.KeyHeadDim, g.ValueHeadDim, p.m()
		w := p.mul(m, nv, dk)
		u := p.mul(m, nv, dv)
		s := p.mul(ceilDiv(m, FLAChunkSize), nv, dk, dv)
		return shape(BF16, p.add(w, u, s, u))
	},

	// Mamba-2 SSD chunked scan scratch (mamba_ssm ssd_combined.py
	// _mamba_chunk_scan_combined_fwd), F32, flat:
	//   dt, dA_cumsum [nheads, ⌈M/chunk⌉·chunk] each (_chunk_cumsum_fwd)
	//   CB            [n_groups, ⌈M/chunk⌉, chunk, chunk] (_bmm_chunk_fwd)
	// Mamba-2 layers only.
	SSDScratch: func(p *planner) bufferShape {
		if !p.hasMamba() {
			return absent("no Mamba-2 layers")
		}
		m := p.shape.mamba
		chunks := ceilDiv(p.m(), m.ChunkSize)
		dt := p.mul(m.NumHeads, chunks, m.ChunkSize)
		cb := p.mul(m.NumGroups, chunks, m.ChunkSize, m.ChunkSize)
		return shape(F32, p.add(dt, dt, cb))
	},

	// [M] U32 token ids, always.
	TokenIDs: func(p *planner) bufferShape { return shape(U32, p.m()) },

	// Dense-FFN prefill with per-token dynamic int8 activations (vLLM
	// scaled_int8_quant): ffn_act_q8 [M, max(H, I)] I8, the int8 copy of the
	// gate/up input (H) or down input (I); ffn_act_a [M, I] BF16,
	// act(gate)·up; ffn_act_scale [M] F32, one scale per token. Dense models (E = 0).
	FFNActQ8: func(p *planner) bufferShape {
		if r := denseOnly(p); r != "" {
			return absent(r)
		}
		return shape(I8, p.m(), max(p.h(), p.cfg.IntermediateSize))
	},
	FFNActA: func(p *planner) bufferShape {
		if r := denseOnly(p); r != "" {
			return absent(r)
		}
		return shape(BF16, p.m(), p.cfg.IntermediateSize)
	},
	FFNActScale: func(p *planner) bufferShape {
		if r := denseOnly(p); r != "" {
			return absent(r)
		}
		return shape(F32, p.m())
	},

	// [M, W] FP8 e4m3 activations and [M, ⌈W/128⌉] F32 per-128-block scales
	// (DeepSeek-V3 1×128 activation tiles), W = max(H, I, Im, shared), always.
	FP8Act:      func(p *planner) bufferShape { return shape(FP8, p.m(), p.widest()) },
	FP8ActScale: func(p *planner) bufferShape { return shape(F32, p.m(), ceilDiv(p.widest(), FP8BlockSize)) },

	// Native Q2 prefill (llama.cpp Q2_K): q2_dequant_scratch [F, H] BF16 holds
	// one FFN weight (F = max(I, Im, shared)) dequantized for a BF16 GEMM, as
	// ggml_cuda_op_mul_mat_cublas converts src0; q2_act_q8 [M, ⌈max(H, F)/256⌉·292]
	// U8 holds the activations as block_q8_K. Only with Options.Q2Prefill.
	Q2DequantScratch: func(p *planner) bufferShape {
		if !p.opts.Q2Prefill {
			return absent("q2_prefill is off")
		}
		return shape(BF16, p.ffnWidth(), p.h())
	},
	Q2ActQ8: func(p *planner) bufferShape {
		if !p.opts.Q2Prefill {
			return absent("q2_prefill is off")
		}
		return shape(U8, p.m(), p.mul(ceilDiv(p.widest(), Q8KBlockSize), Q8KBlockBytes))
	},

	// LoRA (only with lora_max_rank > 0): lora_xa [M, max_rank] BF16 (x·A),
	// lora_delta [M, max(H, F)] BF16 (x·A·B for any projection output),
	// lora_hact [M, F] BF16 (the FFN activation an adapter reads), lora_seq_slot
	// [M] I32 (each token's adapter slot); F = max(I, Im, shared).
	LoRAXA: func(p *planner) bufferShape {
		if p.opts.LoRAMaxRank == 0 {
			return absent("lora_max_rank is 0")
		}
		return shape(BF16, p.m(), p.opts.LoRAMaxRank)
	},
	LoRADelta: func(p *planner) bufferShape {
		if p.opts.LoRAMaxRank == 0 {
			return absent("lora_max_rank is 0")
		}
		return shape(BF16, p.m(), p.widest())
	},
	LoRAHAct: func(p *planner) bufferShape {
		if p.opts.LoRAMaxRank == 0 {
			return absent("lora_max_rank is 0")
		}
		return shape(BF16, p.m(), p.ffnWidth())
	},
	LoRASeqSlot: func(p *planner) bufferShape {
		if p.opts.LoRAMaxRank == 0 {
			return absent("lora_max_rank is 0")
		}
		return shape(I32, p.m())
	},
}

// hiddenRows is [M, H] BF16.
func hiddenRows(p *planner) bufferShape { return shape(BF16, p.m(), p.h()) }

// gdnQKVZRows is [M, 2·nk·dk + 2·nv·dv] BF16 for GDN models.
func gdnQKVZRows(p *planner) bufferShape {
	if !p.hasGDN() {
		return absent("no GDN layers")
	}
	return shape(BF16, p.m(), p.gdnQKVZ())
}

// expertRows is [k2·K, width] BF16 with k2 = max(k_max, M), for MoE models.
func expertRows(p *planner, width int64) bufferShape {
	if !p.hasMoE() {
		return absent("no MoE layers")
	}
	k2 := max(*p.opts.KMax, p.m()) // Resolve sets KMax
	return shape(BF16, p.mul(k2, p.cfg.NumExpertsPerTok), width)
}

// hcMult is hc_mult, 0 without hyper-connections.
func hcMult(p *planner) int64 { return p.shape.hcMult }

// denseOnly is why the dense-FFN scratch is absent, "" when present.
func denseOnly(p *planner) string {
	switch {
	case p.cfg.NumExperts > 0:
		return "routed experts (E > 0)"
	case p.cfg.Counts.DenseMLP == 0:
		return "no dense MLP layers"
	}
	return ""
}
