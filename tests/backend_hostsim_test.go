//go:build !cuda

package tests

import (
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// testBackend is the device the backend-generic integration tests run on:
// here a fresh simulated H200; in a -tags cuda build, CUDA device 0
// (backend_cuda_test.go), so the same tests run on the GPU machine.
func testBackend(t testing.TB) testDevice {
	sim := newSim(t, gpuworker.HostSimConfig{Name: "hostsim H200"})
	return testDevice{
		name:       "hostsim",
		factory:    func() (gpuworker.Backend, error) { return sim, nil },
		bytesInUse: sim.BytesInUse,
		slack:      0,
	}
}
