//go:build !cuda

package gpuworker

import "fmt"

// newCUDABackend stands in for the cuda backend in a build without the cuda
// tag (cuda.go): it always fails with ErrNoCUDA, and the binary neither links
// libcuda nor runs gorgonia.org/cu's init().
func newCUDABackend(ordinal int) (Backend, error) {
	return nil, fmt.Errorf("cuda device %d: %w", ordinal, ErrNoCUDA)
}

// cudaDeviceCount stands in for the cuda device count: ErrNoCUDA.
func cudaDeviceCount() (int, error) {
	return 0, fmt.Errorf("cuda device count: %w", ErrNoCUDA)
}
