package arena

import "fmt"

// MXFP4Backend is the vLLM MXFP4 MoE kernel whose weight layout
// EstimateWeights sizes routed experts in. vLLM does not keep a checkpoint's
// MXFP4 experts as stored: Mxfp4MoEMethod.create_weights
// (vllm/model_executor/layers/quantization/mxfp4.py) allocates every
// layer's experts as w13 [E, 2·Ip, Hp/2] U8 with scales [E, 2·Ip, Hp/32],
// w2 [E, Hp, Ip/2] U8 with scales [E, Hp, Ip/32] and biases [E, 2·Ip] and
// [E, Hp], where Hp and Ip are hidden_size and the expert width rounded up
// (vllm.utils.math_utils.round_up) to what the backend's kernel needs. The
// checkpoint's values are copied into the zero-filled padded tensors, so the
// engine holds the padded bytes. The backend is chosen by
// get_mxfp4_backend in the same file, from the GPU and the environment.
type MXFP4Backend uint8

// The MXFP4 MoE backends, by the padding their kernels need.
const (
	// MXFP4Marlin is Mxfp4Backend.MARLIN: the expert width rounded up to
	// 128 and hidden_size to 256 ("the moe marlin kernel requires that for
	// each linear n % 256 == 0 and k % 128 == 0"). vLLM picks it on GPUs
	// before Hopper (A100, L4, RTX 3090/4090), on Hopper and Blackwell
	// without triton_kernels, with VLLM_MXFP4_USE_MARLIN, and for LoRA in
	// the vLLM 0.11 line. gpt-oss: 2880 → 3072 (hidden), 2880 → 2944
	// (expert width). It is the zero value: it is the layout vLLM 0.10.1
	// reported loading gpt-oss-120b on an H100 ("Model loading took 65.9651
	// GiB", vllm-project/vllm#23278), which the estimate matches within 0.1 GiB.
	MXFP4Marlin MXFP4Backend = iota
	// MXFP4FlashInferTRTLLM is Mxfp4Backend.SM100_FI_MXFP4_MXFP8_TRTLLM and
	// SM100_FI_MXFP4_BF16, FlashInfer's TRT-LLM kernels on Blackwell
	// (B200, GB200: the default there with FlashInfer): both rounded up
	// to 256. gpt-oss: 2880 → 3072 and 2880 → 3072.
	MXFP4FlashInferTRTLLM
	// MXFP4FlashInferCUTLASS is Mxfp4Backend.SM100_FI_MXFP4_MXFP8_CUTLASS
	// and SM90_FI_MXFP4_BF16 (Hopper with VLLM_USE_FLASHINFER_MOE_MXFP4_BF16):
	// both rounded up to 128, as on ROCm outside gfx950
	// (mxfp4_utils.get_padding_alignment). gpt-oss: 2880 → 2944 and 2880 → 2944.
	MXFP4FlashInferCUTLASS
	// MXFP4Triton is Mxfp4Backend.TRITON on CUDA (Hopper and Blackwell with
	// triton_kernels and without FlashInfer's): the expert width rounded up
	// to 64, hidden_size kept, and the expert biases converted to F32 by
	// process_weights_after_loading. gpt-oss's dims are kept (2880 is a
	// multiple of 64). The triton_kernels Hopper layouts (_swizzle_mxfp4)
	// pad the scales to their tiles, which is not modelled (under 0.1% of
	// the experts).
	MXFP4Triton
)

var mxfp4BackendNames = [...]string{
	MXFP4Marlin:            "marlin",
	MXFP4FlashInferTRTLLM:  "flashinfer_trtllm",
	MXFP4FlashInferCUTLASS: "flashinfer_cutlass",
	MXFP4Triton:            "triton",
}

// String is the backend's name ("marlin", "flashinfer_trtllm",
// "flashinfer_cutlass", "triton").
func (b MXFP4Backend) String() string {
	if int(b) >= len(mxfp4BackendNames) {
		return fmt.Sprintf("mxfp4_backend(%d)", uint8(b))
	}
	return mxfp4BackendNames[b]
}

// MarshalText writes the backend's name.
func (b MXFP4Backend) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText reads a name MarshalText wrote. Errors: an *OptionError for
// "mxfp4_backend" naming the accepted names.
func (b *MXFP4Backend) UnmarshalText(text []byte) error {
	for i, n := range mxfp4BackendNames {
		if n == string(text) {
			*b = MXFP4Backend(i)
			return nil
		}
	}
	return &OptionError{Option: "mxfp4_backend", Value: string(text),
		Reason: "unknown MXFP4 MoE backend; want marlin, flashinfer_trtllm, flashinfer_cutlass or triton"}
}

// alignments are the multiples the backend rounds the expert width and
// hidden_size up to (1: kept as is).
func (b MXFP4Backend) alignments() (expertWidth, hidden int64, err error) {
	switch b {
	case MXFP4Marlin:
		return 128, 256, nil
	case MXFP4FlashInferTRTLLM:
		return 256, 256, nil
	case MXFP4FlashInferCUTLASS:
		return 128, 128, nil
	case MXFP4Triton:
		return 64, 1, nil
	}
	return 0, 0, &OptionError{Option: "mxfp4_backend", Value: b.String(),
		Reason: "unknown MXFP4 MoE backend; want marlin, flashinfer_trtllm, flashinfer_cutlass or triton"}
}

// expertLayout is how the engine holds one model's routed experts: their
// hidden and width dims and the format of their biases. The zero value
// (and any layout with h = 0) is the checkpoint's.
type expertLayout struct {
	h, im      int64        // padded hidden_size and expert width; 0: as the checkpoint
	biasFormat WeightFormat // the biases' format; 0: as the checkpoint
}

// padded reports whether the layout differs from the checkpoint's.
func (e expertLayout) padded() bool { return e.h != 0 }

// mxfp4Layout is the layout of the builder's routed experts: padded to the
// MXFP4 backend's alignments when quantization_config's quant_method is
// mxfp4 (Mxfp4Config hands every FusedMoE layer to Mxfp4MoEMethod), the
// experts are sized as MXFP4 and the weights as the engine holds them;
// else the checkpoint's. DeepSeek-V4's expert_dtype fp4 goes through
// another quantization config and is not padded. A round-up that
// overflows is an *OverflowError (in w.err).
func (w *weightBuilder) mxfp4Layout() expertLayout {
	c := w.cfg
	if !w.f.mxfp4Method || w.f.expert != WeightMXFP4 || w.f.checkpointLayout || c.NumExperts == 0 {
		return expertLayout{}
	}
	ai, ah, err := w.f.mxfp4.alignments()
	if err != nil {
		w.err = err
		return expertLayout{}
	}
	l := expertLayout{h: w.roundUp(c.HiddenSize, ah), im: w.roundUp(c.MoEIntermediateSize, ai)}
	if w.f.mxfp4 == MXFP4Triton {
		l.biasFormat = WeightF32
	}
	return l
}

// roundUp is x rounded up to a multiple of align (vLLM round_up), through
// the builder's sizer.
func (w *weightBuilder) roundUp(x, align int64) int64 {
	if align <= 1 {
		return x
	}
	return w.mul(ceilDiv(x, align), align)
}

// biasNote is the part of the padding note about the biases' format.
func biasNote(l expertLayout) string {
	if l.biasFormat == 0 {
		return ""
	}
	return fmt.Sprintf(", expert biases as %v", l.biasFormat)
}
