package gpuworker

import "fmt"

// The backend kinds.
const (
	KindHostSim = "hostsim"
	KindCUDA    = "cuda"
)

// BackendConfig selects and configures a backend.
type BackendConfig struct {
	// Kind is KindHostSim (the default, "") or KindCUDA.
	Kind string
	// Ordinal is the CUDA device ordinal (cuda only).
	Ordinal int
	// HostSim configures the simulated device (hostsim only).
	HostSim HostSimConfig
}

// Factory returns the BackendFactory for the configuration. An unknown kind
// gives a factory that fails with ErrInvalidValue; KindCUDA in a build without
// the cuda tag gives one that fails with ErrNoCUDA.
func (c BackendConfig) Factory() BackendFactory {
	switch c.Kind {
	case "", KindHostSim:
		return func() (Backend, error) { return NewHostSim(c.HostSim) }
	case KindCUDA:
		return func() (Backend, error) { return newCUDABackend(c.Ordinal) }
	default:
		return func() (Backend, error) {
			return nil, fmt.Errorf("backend %q: %w: want %q or %q", c.Kind, ErrInvalidValue, KindHostSim, KindCUDA)
		}
	}
}
