package gpuarena

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// Option configures New.
type Option func(*config)

type config struct {
	backend     gpuworker.BackendFactory
	utilization float64
	logger      *slog.Logger
	spin        time.Duration
	layout      device.Layout
}

func defaultConfig() config {
	return config{
		backend:     gpuworker.BackendConfig{}.Factory(),
		utilization: arena.DefaultGPUMemoryUtilization,
		logger:      slog.New(slog.DiscardHandler),
		layout:      device.LayoutPooled,
		spin:        gpuworker.DefaultSpin,
	}
}

// WithBackend selects a backend built into this binary
// (gpuworker.Backends): hostsim (the default) or, with -tags cuda, cuda.
func WithBackend(b gpuworker.BackendConfig) Option {
	return func(c *config) { c.backend = b.Factory() }
}

// WithBackendFactory makes the backend with f, on the GPU thread: for a
// backend of the embedder's own, or a simulated device the caller keeps a
// handle to (fault injection, bytes in use).
func WithBackendFactory(f gpuworker.BackendFactory) Option {
	return func(c *config) { c.backend = f }
}

// WithGPUMemoryUtilization sets gpu_memory_utilization, the fraction
// (0 < f ≤ 1) of the device's total memory this process may hold; memory
// other processes hold counts against it, and the budget is arena.Budget's
// (see Manager.Budget). Unset, it is arena.DefaultGPUMemoryUtilization
// (0.90); New returns an *arena.OptionError (errors.Is ErrInvalidOption)
// for f outside (0, 1], 0 included.
func WithGPUMemoryUtilization(f float64) Option { return func(c *config) { c.utilization = f } }

// WithLogger routes gpuarena's logs, and protoactor-go's warnings and errors,
// to l. Without it gpuarena logs nothing (a discard logger): not even to
// slog.Default, which belongs to the program, not to a library.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithArenaLayout chooses how BuildArena allocates: device.LayoutPooled (the
// default: one allocation, buffers at 256-byte-aligned offsets) or
// device.LayoutDiscrete (one allocation per buffer, for memory-checker runs).
// New returns an *arena.OptionError for any other value.
func WithArenaLayout(l device.Layout) Option { return func(c *config) { c.layout = l } }

// WithDispatcherSpin sets how long the GPU thread polls for work before it
// parks, and a lone caller polls for its reply (see gpuworker.WithSpin).
// Default gpuworker.DefaultSpin (20 µs); 0 turns polling off.
func WithDispatcherSpin(d time.Duration) Option { return func(c *config) { c.spin = d } }

func (c config) validate() error {
	if err := arena.ValidateGPUMemoryUtilization(c.utilization); err != nil {
		return err
	}
	switch {
	case c.spin < 0:
		return &arena.OptionError{Option: "dispatcher_spin", Value: c.spin, Reason: "must not be negative"}
	case c.layout != device.LayoutPooled && c.layout != device.LayoutDiscrete:
		return &arena.OptionError{Option: "arena_layout", Value: c.layout, Reason: fmt.Sprintf("must be %q or %q", device.LayoutPooled, device.LayoutDiscrete)}
	case c.backend == nil:
		return &arena.OptionError{Option: "backend", Value: nil, Reason: "the backend factory must not be nil"}
	case c.logger == nil:
		return &arena.OptionError{Option: "logger", Value: nil, Reason: "must not be nil"}
	}
	return nil
}
