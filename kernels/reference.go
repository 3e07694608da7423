package kernels

import (
	"fmt"
	"math"
)

// BF16ToF32 widens a BF16 value: its bits are the top half of the F32's.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds f to BF16, to nearest with ties to even, as PyTorch's
// .to(torch.bfloat16) and kernels.cu's f32_to_bf16 do; a NaN stays a quiet
// NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// ULPs is how many BF16 values lie between a and b, +1 (0 when they are
// equal, 1 for neighbours): their distance in units of the BF16 ulp, across
// zero too (+0 and −0 are 0 apart). Two NaNs are 0 apart; a NaN and a
// number are as far apart as can be.
func ULPs(a, b uint16) int {
	nan := func(h uint16) bool { return h&0x7fff > 0x7f80 }
	switch {
	case nan(a) && nan(b):
		return 0
	case nan(a) || nan(b):
		return math.MaxInt32
	}
	ord := func(h uint16) int {
		if h&0x8000 != 0 {
			return -int(h & 0x7fff)
		}
		return int(h)
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

// RMSNormULPs is the tolerance, in BF16 ulps, between the GPU's RMSNorm
// and RMSNormBF16: one per rounding to BF16 the formula makes (one with an
// offset weight, two with a plain one). The GPU sums the squares in
// another order and fuses multiply-adds, which moves the F32 mean by a few
// F32 ulps (2⁻²⁴ relative each, about √cols of them) — far below a BF16
// ulp (2⁻⁸ relative) — so a result differs only where it lies that close
// to a point halfway between two BF16 values, and then by one ulp for
// each rounding.
func RMSNormULPs(offset bool) int {
	if offset {
		return 1
	}
	return 2
}

// ResidualAddULPs is the tolerance of ResidualAdd: 0. Both sides add the
// same two F32 values with one IEEE round-to-nearest addition and round
// the sum to BF16 the same way.
const ResidualAddULPs = 0

// RMSNormBF16 is the reference of the RMSNorm kernel, row by row: x and
// out are [rows, cols] BF16 (out may be x), w is [cols] BF16:
//
//	r      = 1 / sqrt(Σ x_i² / cols + eps)     in F32
//	offset: out_i = bf16(x_i · r · (1 + w_i))  Qwen3NextRMSNorm, GemmaRMSNorm
//	else:   out_i = bf16(bf16(x_i · r) · w_i)  LlamaRMSNorm
//
// (Hugging Face transformers, modeling_qwen3_next.py, modeling_gemma.py,
// modeling_llama.py; vLLM csrc/layernorm_kernels.cu rms_norm_kernel for
// the plain weight's two roundings). The squares are summed in order, in
// F32, without fused multiply-adds. It panics when the slices are shorter
// than rows·cols and cols.
func RMSNormBF16(out, x, w []uint16, rows, cols int, eps float32, offset bool) {
	if len(x) < rows*cols || len(out) < rows*cols || len(w) < cols {
		panic(fmt.Sprintf("kernels: RMSNormBF16 of [%d, %d]: x has %d elements, out %d, w %d", rows, cols, len(x), len(out), len(w)))
	}
	for r := range rows {
		xr, yr := x[r*cols:(r+1)*cols], out[r*cols:(r+1)*cols]
		var acc float32
		for _, h := range xr {
			v := BF16ToF32(h)
			acc += float32(v * v)
		}
		inv := 1 / float32(math.Sqrt(float64(acc/float32(cols)+eps)))
		for i, h := range xr {
			v := float32(BF16ToF32(h) * inv)
			g := BF16ToF32(w[i])
			if offset {
				yr[i] = F32ToBF16(v * (1 + g))
			} else {
				yr[i] = F32ToBF16(BF16ToF32(F32ToBF16(v)) * g)
			}
		}
	}
}

// ResidualAddBF16 is the reference of the ResidualAdd kernel: out_i =
// bf16(a_i + b_i), the sum in F32 (out may be a or b). It panics when a or
// b is shorter than out.
func ResidualAddBF16(out, a, b []uint16) {
	if len(a) < len(out) || len(b) < len(out) {
		panic(fmt.Sprintf("kernels: ResidualAddBF16 of %d elements: a has %d, b %d", len(out), len(a), len(b)))
	}
	for i := range out {
		out[i] = F32ToBF16(BF16ToF32(a[i]) + BF16ToF32(b[i]))
	}
}
