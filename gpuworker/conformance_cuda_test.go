//go:build cuda

package gpuworker_test

import (
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// TestConformanceCUDA runs the conformance suite on CUDA device 0. It needs a
// GPU: build with -tags cuda and run on the GPU machine (docs/gpu-validation.md).
func TestConformanceCUDA(t *testing.T) {
	runConformance(t, gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory())
}
