//go:build cuda

package gpuworker_test

import (
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// TestComputeConformanceCUDA runs the compute conformance suite on CUDA
// device 0: the same PTX, launches and references as on hostsim. It needs
// a GPU: build with -tags cuda and run on the GPU machine
// (scripts/compute-validation.sh).
func TestComputeConformanceCUDA(t *testing.T) {
	runComputeConformance(t, gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory())
}
