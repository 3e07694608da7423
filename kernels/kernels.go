// Package kernels ships gpuarena's CUDA kernels: their CUDA C source
// (kernels.cu), the PTX generated from it (kernels.ptx, by gen-ptx.sh),
// which a forward step loads as a module (gpuarena.Manager.LoadModule)
// and launches (device.Device.Launch), and their Go references, which the
// simulated device runs for the same entry points: importing the package
// registers them (gpuworker.RegisterKernel), so one step's code runs on
// hostsim and on cuda alike.
//
// BF16 tensors are their raw 16-bit patterns ([]uint16 in Go, unsigned
// short in CUDA), little-endian in device memory.
package kernels

import (
	_ "embed"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// PTX is kernels.ptx: the module holding RMSNorm and ResidualAdd, PTX ISA
// 7.0 for compute capability 8.0 and later (the driver compiles it for the
// device when it is loaded). Do not modify it.
//
//go:embed kernels.ptx
var PTX []byte

// ModuleName is the name arenactl loads PTX under.
const ModuleName = "gpuarena_kernels"

// Kernel names: the PTX .entry names.
const (
	// RMSNorm is rmsnorm_bf16(out, x, w *bf16, cols u32, eps f32, offset
	// u32); see RMSNormBF16.
	RMSNorm = "rmsnorm_bf16"
	// ResidualAdd is residual_add_bf16(out, a, b *bf16, n u64); see
	// ResidualAddBF16.
	ResidualAdd = "residual_add_bf16"
)

// blockThreads is the block the launch helpers use: 256 threads, eight
// warps.
const blockThreads = 256

func init() {
	gpuworker.RegisterKernel(RMSNorm, hostRMSNorm)
	gpuworker.RegisterKernel(ResidualAdd, hostResidualAdd)
}

// RMSNormLaunch is the launch of RMSNorm over rows rows of cols elements:
// x and out [rows, cols] BF16 (out may be x), w [cols] BF16, eps as the
// model's config.json gives it (rms_norm_eps), offset for a weight stored
// as an offset from 1 (Qwen3-Next, Gemma: 1 + w; a zero-filled weight such
// as norm_unit_w is then a unit one). One block of 256 threads per row.
func RMSNormLaunch(out, x, w device.DevicePtr, rows, cols uint32, eps float32, offset bool) (device.LaunchConfig, []uint64) {
	off := uint32(0)
	if offset {
		off = 1
	}
	cfg := device.LaunchConfig{Grid: device.Dim3{X: rows}, Block: device.Dim3{X: blockThreads}}
	return cfg, []uint64{device.PtrArg(out), device.PtrArg(x), device.PtrArg(w), device.U32Arg(cols), device.F32Arg(eps), device.U32Arg(off)}
}

// ResidualAddLaunch is the launch of ResidualAdd over n elements: out =
// a + b, each [n] BF16 (out may be a or b). Blocks of 256 threads, at most
// 65535 of them (a grid-stride loop covers the rest).
func ResidualAddLaunch(out, a, b device.DevicePtr, n uint64) (device.LaunchConfig, []uint64) {
	blocks := min(max((n+blockThreads-1)/blockThreads, 1), 65535)
	cfg := device.LaunchConfig{Grid: device.Dim3{X: uint32(blocks)}, Block: device.Dim3{X: blockThreads}}
	return cfg, []uint64{device.PtrArg(out), device.PtrArg(a), device.PtrArg(b), device.U64Arg(n)}
}
