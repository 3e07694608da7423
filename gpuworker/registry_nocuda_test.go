//go:build !cuda

package gpuworker_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// Without the cuda tag the cuda backend is not built in: asking for it
// fails with a *BackendNotBuiltInError that names it, lists what is built in
// and says which tag builds it.
func TestCUDAIsNotBuiltInWithoutTheTag(t *testing.T) {
	if slices.Contains(gpuworker.Backends(), gpuworker.KindCUDA) {
		t.Fatalf("Backends() = %v lists cuda in a build without the tag", gpuworker.Backends())
	}
	b, err := gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}.Factory()()
	var nb *gpuworker.BackendNotBuiltInError
	if b != nil || !errors.As(err, &nb) || nb.Name != gpuworker.KindCUDA || !slices.Contains(nb.Available, gpuworker.KindHostSim) {
		t.Fatalf("cuda factory = %v, %v; want nil and a BackendNotBuiltInError naming cuda, listing hostsim", b, err)
	}
	if !strings.Contains(err.Error(), "-tags cuda") {
		t.Fatalf("error %q does not say how to build cuda in", err)
	}
}
