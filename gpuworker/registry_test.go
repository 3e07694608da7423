package gpuworker_test

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// registrations numbers the backends the tests register: a name is taken
// for good, and -count runs a test again in the same process.
var registrations atomic.Int64

// A backend registered under a name is opened by a BackendConfig of that
// Kind, with that configuration, and listed by Backends in order.
func TestRegisterPlugsABackendIn(t *testing.T) {
	name := fmt.Sprintf("test-registered-%d", registrations.Add(1))
	var seen gpuworker.BackendConfig
	gpuworker.Register(name, func(c gpuworker.BackendConfig) (gpuworker.Backend, error) {
		seen = c
		return gpuworker.NewHostSim(gpuworker.HostSimConfig{Name: "registered", TotalBytes: c.HostSim.TotalBytes})
	})
	cfg := gpuworker.BackendConfig{Kind: name, Ordinal: 3, HostSim: gpuworker.HostSimConfig{TotalBytes: 64 * mib}}
	w := startWith(t, cfg.Factory())
	if info := w.Info(); info.Name != "registered" || info.TotalBytes != 64*mib {
		t.Fatalf("Info %+v: want the registered backend's device, 64 MiB", info)
	}
	if seen.Kind != name || seen.Ordinal != 3 || seen.HostSim.TotalBytes != 64*mib {
		t.Fatalf("the opener got %+v, want the configuration given", seen)
	}
	names := gpuworker.Backends()
	if !slices.Contains(names, name) || !slices.Contains(names, gpuworker.KindHostSim) || !slices.IsSorted(names) {
		t.Fatalf("Backends() = %v: want %s and %s, sorted", names, name, gpuworker.KindHostSim)
	}
}

// Register refuses an empty name, a nil opener and a name taken already.
func TestRegisterRefusesMistakes(t *testing.T) {
	open := func(gpuworker.BackendConfig) (gpuworker.Backend, error) { return nil, errors.New("unused") }
	for _, c := range []struct {
		name string
		open gpuworker.BackendOpener
	}{{"", open}, {"test-nil-opener", nil}, {gpuworker.KindHostSim, open}} {
		t.Run(fmt.Sprintf("%q", c.name), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("Register(%q) did not panic", c.name)
				}
			}()
			gpuworker.Register(c.name, c.open)
		})
	}
	if slices.Contains(gpuworker.Backends(), "test-nil-opener") {
		t.Fatal("a refused registration is listed")
	}
}

// A Kind no backend registered under fails Start with a
// *BackendNotBuiltInError naming it and the backends built in.
func TestUnknownBackendIsNotBuiltIn(t *testing.T) {
	_, err := gpuworker.Start(newSystem(t), gpuworker.BackendConfig{Kind: "tpu"}.Factory(), gpuworker.WithLogger(quiet))
	var nb *gpuworker.BackendNotBuiltInError
	if !errors.Is(err, gpuworker.ErrBackendNotBuiltIn) || !errors.As(err, &nb) {
		t.Fatalf("Start of backend tpu: %v, want a *BackendNotBuiltInError", err)
	}
	if nb.Name != "tpu" || !slices.Equal(nb.Available, gpuworker.Backends()) {
		t.Fatalf("error names %q and %v, want tpu and %v", nb.Name, nb.Available, gpuworker.Backends())
	}
}
