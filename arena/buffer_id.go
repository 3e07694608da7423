package arena

// BufferID names one intermediate tensor of the arena. The order is the
// allocation order; release walks it backwards. Every BufferID has exactly one
// rule in the buffer table (see rules.go), and a test fails if one is missing.
type BufferID uint8

// The buffers of design.md §5, in allocation order.
const (
	HiddenStates BufferID = iota
	Residual
	NormOutput
	MoEOutput
	QKVOutput
	AttnOutput
	GateLogits
	GateLogitsF32
	MoERouterInF32
	Logits
	SSMQKVZ
	SSMDeinterleaved
	SSMBA
	SSMGates
	SSMConvOutF32
	Scratch
	ExpertGateOut
	ExpertUpOut
	ExpertDownOut
	SplitKWorkspace
	OLatent
	NormUnitW
	HCStreams
	HCPost
	HCComb
	GDNFLAScratch
	SSDScratch
	TokenIDs
	FFNActQ8
	FFNActA
	FFNActScale
	FP8Act
	FP8ActScale
	Q2DequantScratch
	Q2ActQ8
	LoRAXA
	LoRADelta
	LoRAHAct
	LoRASeqSlot

	// NumBuffers is the number of BufferIDs; it is not a buffer.
	NumBuffers
)

var bufferNames = [NumBuffers]string{
	HiddenStates:     "hidden_states",
	Residual:         "residual",
	NormOutput:       "norm_output",
	MoEOutput:        "moe_output",
	QKVOutput:        "qkv_output",
	AttnOutput:       "attn_output",
	GateLogits:       "gate_logits",
	GateLogitsF32:    "gate_logits_f32",
	MoERouterInF32:   "moe_router_in_f32",
	Logits:           "logits",
	SSMQKVZ:          "ssm_qkvz",
	SSMDeinterleaved: "ssm_deinterleaved",
	SSMBA:            "ssm_ba",
	SSMGates:         "ssm_gates",
	SSMConvOutF32:    "ssm_conv_out_f32",
	Scratch:          "scratch",
	ExpertGateOut:    "expert_gate_out",
	ExpertUpOut:      "expert_up_out",
	ExpertDownOut:    "expert_down_out",
	SplitKWorkspace:  "splitk_workspace",
	OLatent:          "o_latent",
	NormUnitW:        "norm_unit_w",
	HCStreams:        "hc_streams",
	HCPost:           "hc_post",
	HCComb:           "hc_comb",
	GDNFLAScratch:    "gdn_fla_scratch",
	SSDScratch:       "ssd_scratch",
	TokenIDs:         "token_ids",
	FFNActQ8:         "ffn_act_q8",
	FFNActA:          "ffn_act_a",
	FFNActScale:      "ffn_act_scale",
	FP8Act:           "fp8_act",
	FP8ActScale:      "fp8_act_scale",
	Q2DequantScratch: "q2_dequant_scratch",
	Q2ActQ8:          "q2_act_q8",
	LoRAXA:           "lora_xa",
	LoRADelta:        "lora_delta",
	LoRAHAct:         "lora_hact",
	LoRASeqSlot:      "lora_seq_slot",
}

// String is the buffer's name exactly as in design.md §5 ("hidden_states").
func (id BufferID) String() string {
	if id >= NumBuffers {
		return "buffer(?)"
	}
	return bufferNames[id]
}

// BufferIDs returns every BufferID in allocation order.
func BufferIDs() []BufferID {
	ids := make([]BufferID, NumBuffers)
	for i := range ids {
		ids[i] = BufferID(i)
	}
	return ids
}
