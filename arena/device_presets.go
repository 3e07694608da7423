package arena

import (
	"fmt"
	"strings"
)

// DevicePreset is a named device and the total memory its driver reports
// (cuMemGetInfo's total, the same as cuDeviceTotalMem and deviceQuery's
// "Total amount of global memory"), which is less than the data sheet's
// figure and than nvidia-smi's "Total": the driver keeps part for itself.
// The total varies by a few tens of MiB with the driver version.
type DevicePreset struct {
	// Name is the preset's name as users give it ("h100-80gb").
	Name string
	// Device is the device's name as the driver reports it ("NVIDIA H100 80GB HBM3").
	Device string
	// TotalBytes is the total memory the driver reports, in bytes.
	TotalBytes int64
	// Source says where TotalBytes was read.
	Source string
}

// H200TotalBytes is an NVIDIA H200's total memory as the driver reports it:
// 150,109,880,320 B (139.80 GiB; cuDeviceTotalMem on the project's H200,
// driver 580.159.04, docs/gpu-validation.md), not the 141 GB of the data
// sheet.
const H200TotalBytes = 150_109_880_320

// devicePresets are the presets, in the order DevicePresets lists them.
var devicePresets = []DevicePreset{
	{Name: "h100-80gb", Device: "NVIDIA H100 80GB HBM3", TotalBytes: 85_045_477_376,
		Source: "deviceQuery, CUDA 12.7 driver: github.com/thamada/nvidia-smi nvsim/H100SXMx8_deviceQuery.py (81106 MBytes); " +
			"CUDA 13.0 drivers report 85,017,755,648 B"},
	{Name: "h200", Device: "NVIDIA H200", TotalBytes: H200TotalBytes,
		Source: "cuDeviceTotalMem on the project's H200, driver 580.159.04 (docs/gpu-validation.md)"},
	{Name: "a100-40gb", Device: "NVIDIA A100-SXM4-40GB", TotalBytes: 42_298_834_944,
		Source: "deviceQuery, CUDA 12.2 driver: github.com/bottlerocket-os/bottlerocket pull 3873 (40339 MBytes)"},
	{Name: "a100-80gb", Device: "NVIDIA A100-SXM4-80GB", TotalBytes: 85_100_068_864,
		Source: "deviceQuery, CUDA 12.5 driver: github.com/thamada/nvidia-smi gls/A100SXMx4_deviceQuery.py (81158 MBytes)"},
	{Name: "l4", Device: "NVIDIA L4", TotalBytes: 23_570_219_008,
		Source: "deviceQuery, CUDA 12.4 driver: github.com/thamada/nvidia-smi gls/L4_deviceQuery.py (22478 MBytes)"},
	{Name: "rtx-4090", Device: "NVIDIA GeForce RTX 4090", TotalBytes: 25_386_352_640,
		Source: "deviceQuery, CUDA 12.4 Linux driver: github.com/thamada/nvidia-smi gls/RTX4090_deviceQuery.py (24210 MBytes); " +
			"Windows (WDDM) reports less"},
	{Name: "rtx-3090", Device: "NVIDIA GeForce RTX 3090", TotalBytes: 25_327_697_920,
		Source: "deviceQuery, CUDA 12.6 driver: github.com/thamada/nvidia-smi gls/RTX3090_deviceQuery.py (24154 MBytes)"},
	// DGX Spark's GB10 shares 128 GB of LPDDR5x with the CPU; nvidia-smi
	// reports no memory on it. No exact byte count was found: vLLM's
	// start-up check prints the CUDA total as 121.69 GiB (two decimals);
	// this is 121.69 × 2^30 rounded down.
	{Name: "dgx-spark", Device: "NVIDIA GB10", TotalBytes: 130_663_642_562,
		Source: "vLLM's start-up memory check, 121.69 GiB (two decimals; no exact byte count found): " +
			"github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks issue 47; unified memory shared with the CPU"},
}

// DevicePresets returns the named devices arena knows, each with the total
// memory its driver reports and where that figure comes from.
func DevicePresets() []DevicePreset { return append([]DevicePreset(nil), devicePresets...) }

// LookupDevicePreset returns the preset named name (case-insensitive;
// "_" reads as "-"). Errors: an *OptionError for "device" naming the
// presets.
func LookupDevicePreset(name string) (DevicePreset, error) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "_", "-")
	names := make([]string, 0, len(devicePresets))
	for _, p := range devicePresets {
		if p.Name == n {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return DevicePreset{}, &OptionError{Option: "device", Value: clip(name),
		Reason: fmt.Sprintf("unknown device; want one of %s", strings.Join(names, ", "))}
}
