//go:build !cuda

package gpuworker

import (
	"errors"
	"testing"
)

func TestCUDAStubSaysNotBuilt(t *testing.T) {
	b, err := newCUDABackend(0)
	if !errors.Is(err, ErrNoCUDA) || b != nil {
		t.Errorf("newCUDABackend(0) = %v, %v; want nil, ErrNoCUDA", b, err)
	}
	if n, err := cudaDeviceCount(); !errors.Is(err, ErrNoCUDA) || n != 0 {
		t.Errorf("cudaDeviceCount() = %d, %v; want 0, ErrNoCUDA", n, err)
	}
}
