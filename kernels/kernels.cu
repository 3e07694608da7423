// kernels.cu: the CUDA C kernels gpuarena ships, compiled to PTX
// (kernels.ptx) by gen-ptx.sh. A forward step loads the PTX as a module
// (gpuarena.Manager.LoadModule) and launches them (device.Device.Launch).
// Their Go references, in this folder's package, are what the simulated
// device (hostsim) runs for these same entry points, so one step's code
// runs on both backends.
//
// BF16 values are passed as their raw 16 bits (bf16_t): the file needs no
// CUDA header, so nvcc and clang (-nocudainc) both compile it. Every
// conversion to BF16 rounds to nearest, ties to even, as PyTorch's
// .to(torch.bfloat16) does; a NaN stays a (quiet) NaN.

typedef unsigned short bf16_t;
typedef unsigned int u32;
typedef unsigned long long u64;

#if defined(__NVCC__)
#define THREAD_X threadIdx.x
#define BLOCK_X blockIdx.x
#define NTHREADS_X blockDim.x
#define NBLOCKS_X gridDim.x
#define SYNC_THREADS() __syncthreads()
#define SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define SQRT_RN(x) __fsqrt_rn(x)
#else
// clang -nocudainc: no CUDA header, so the attributes and special
// registers are spelled out; clang lowers them as nvcc does.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define THREAD_X __nvvm_read_ptx_sreg_tid_x()
#define BLOCK_X __nvvm_read_ptx_sreg_ctaid_x()
#define NTHREADS_X __nvvm_read_ptx_sreg_ntid_x()
#define NBLOCKS_X __nvvm_read_ptx_sreg_nctaid_x()
#define SYNC_THREADS() __syncthreads()
#define SHFL_XOR(v, m) __nvvm_shfl_sync_bfly_f32(0xffffffffu, (v), (m), 0x1f)
#define SQRT_RN(x) __nvvm_sqrt_rn_f(x)
#endif

union bits32 {
	float f;
	u32 u;
};

// bf16_to_f32 widens a BF16 value: its bits are the top half of the F32's.
static __device__ __forceinline__ float bf16_to_f32(bf16_t h) {
	union bits32 b;
	b.u = (u32)h << 16;
	return b.f;
}

// f32_to_bf16 rounds an F32 to BF16, to nearest, ties to even.
static __device__ __forceinline__ bf16_t f32_to_bf16(float f) {
	union bits32 b;
	b.f = f;
	if ((b.u & 0x7fffffffu) > 0x7f800000u) {
		return (bf16_t)((b.u >> 16) | 0x40u); // NaN: keep it quiet
	}
	b.u += 0x7fffu + ((b.u >> 16) & 1u);
	return (bf16_t)(b.u >> 16);
}

// rmsnorm_bf16 normalises each row of x, [rows, cols] BF16, by its root
// mean square and scales it by the weight w, [cols] BF16, into out, [rows,
// cols] BF16 (out may be x):
//
//   r      = 1 / sqrt(sum_i x_i^2 / cols + eps)       (F32)
//   offset: out_i = bf16(x_i * r * (1 + w_i))         Qwen3-Next, Gemma
//   else:   out_i = bf16(bf16(x_i * r) * w_i)         Llama, Qwen3, Mistral
//
// as Hugging Face's Qwen3NextRMSNorm / GemmaRMSNorm (the weight is stored
// as an offset from 1, so a zero weight is a unit one: norm_unit_w) and
// LlamaRMSNorm compute them, and vLLM's rms_norm kernel
// (csrc/layernorm_kernels.cu) for the plain weight. Launch: grid (rows, 1,
// 1), one block per row; block (n, 1, 1) with n a multiple of 32, at most
// 1024 (256 is a good choice); no dynamic shared memory.
extern "C" __global__ void rmsnorm_bf16(bf16_t *out, const bf16_t *x, const bf16_t *w,
                                        u32 cols, float eps, u32 offset) {
	__shared__ float warp_sums[32];
	const u32 t = THREAD_X;
	const u32 nt = NTHREADS_X;
	const u64 row = BLOCK_X;
	const bf16_t *xr = x + row * cols;
	bf16_t *yr = out + row * cols;

	float acc = 0.0f;
	for (u32 i = t; i < cols; i += nt) {
		const float v = bf16_to_f32(xr[i]);
		acc += v * v;
	}
	for (int m = 16; m > 0; m >>= 1) {
		acc += SHFL_XOR(acc, m);
	}
	if ((t & 31u) == 0) {
		warp_sums[t >> 5] = acc;
	}
	SYNC_THREADS();
	if (t < 32) {
		float s = t < (nt >> 5) ? warp_sums[t] : 0.0f;
		for (int m = 16; m > 0; m >>= 1) {
			s += SHFL_XOR(s, m);
		}
		if (t == 0) {
			warp_sums[0] = s;
		}
	}
	SYNC_THREADS();
	const float r = 1.0f / SQRT_RN(warp_sums[0] / (float)cols + eps);

	for (u32 i = t; i < cols; i += nt) {
		const float v = bf16_to_f32(xr[i]) * r;
		const float g = bf16_to_f32(w[i]);
		yr[i] = offset ? f32_to_bf16(v * (1.0f + g)) : f32_to_bf16(bf16_to_f32(f32_to_bf16(v)) * g);
	}
}

// residual_add_bf16 adds two BF16 vectors of n elements in F32 and rounds
// the sum to BF16: out_i = bf16(a_i + b_i) (out may be a or b), the
// residual connection of a decoder layer (hidden_states = residual +
// hidden_states in Hugging Face's modeling files). Launch: any grid and
// block; a grid-stride loop covers n.
extern "C" __global__ void residual_add_bf16(bf16_t *out, const bf16_t *a, const bf16_t *b, u64 n) {
	const u64 stride = (u64)NBLOCKS_X * NTHREADS_X;
	for (u64 i = (u64)BLOCK_X * NTHREADS_X + THREAD_X; i < n; i += stride) {
		out[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
	}
}
