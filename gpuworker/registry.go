package gpuworker

import (
	"fmt"
	"slices"
	"sync"
)

// BackendConfig selects a registered backend and configures it.
type BackendConfig struct {
	// Kind is the name the backend registered under (Register): KindHostSim
	// (the default, "") and, in a build with the tag cuda, KindCUDA, or any
	// other backend built in.
	Kind string
	// Ordinal is the device ordinal, for a backend with more than one device
	// (cuda: the CUDA device ordinal).
	Ordinal int
	// HostSim configures the simulated device (hostsim only).
	HostSim HostSimConfig
}

// BackendOpener opens a registered backend from its configuration. The GPU
// actor calls it once, on its locked thread, when it starts (it becomes the
// worker's BackendFactory through BackendConfig.Factory).
type BackendOpener func(BackendConfig) (Backend, error)

// registry holds the backends built into this binary, by name.
var registry = struct {
	sync.RWMutex
	openers map[string]BackendOpener
}{openers: make(map[string]BackendOpener)}

// Register makes a backend available under name to BackendConfig.Factory.
// A backend registers itself from an init function in its own file (hostsim
// in hostsim.go; cuda in cuda.go, built with the tag cuda), so that adding
// one adds files and changes none. It panics when name is empty or already
// registered, or open is nil: at init such a mistake is a programming error,
// as with database/sql.Register.
func Register(name string, open BackendOpener) {
	if name == "" || open == nil {
		panic(fmt.Sprintf("gpuworker: Register(%q): a backend needs a name and an opener", name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.openers[name]; dup {
		panic(fmt.Sprintf("gpuworker: Register(%q): a backend of that name is registered already", name))
	}
	registry.openers[name] = open
}

// Backends returns the names of the backends built into this binary,
// sorted.
func Backends() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.openers))
	for name := range registry.openers {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Factory returns the BackendFactory of the configured backend. A Kind no
// backend registered under gives a factory that fails with a
// *BackendNotBuiltInError (errors.Is ErrBackendNotBuiltIn) naming it and the
// backends built in: a backend behind a build tag in a build without the
// tag, or a name no backend has.
func (c BackendConfig) Factory() BackendFactory {
	kind := c.Kind
	if kind == "" {
		kind = KindHostSim
	}
	registry.RLock()
	open, ok := registry.openers[kind]
	registry.RUnlock()
	if !ok {
		err := &BackendNotBuiltInError{Name: kind, Available: Backends()}
		return func() (Backend, error) { return nil, err }
	}
	return func() (Backend, error) { return open(c) }
}

// BackendNotBuiltInError is the error of a BackendConfig whose Kind no
// backend registered under. errors.Is(err, ErrBackendNotBuiltIn) holds.
type BackendNotBuiltInError struct {
	// Name is the backend asked for.
	Name string
	// Available are the backends built into this binary, sorted.
	Available []string
}

func (e *BackendNotBuiltInError) Error() string {
	return fmt.Sprintf("%v: %q is not in this binary, which has %q; a backend behind a build tag needs a build with it (cuda: -tags cuda, see README, Real GPU)",
		ErrBackendNotBuiltIn, e.Name, e.Available)
}

// Unwrap returns ErrBackendNotBuiltIn.
func (e *BackendNotBuiltInError) Unwrap() error { return ErrBackendNotBuiltIn }
