package gpuarena

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/messages"
)

// Option configures New.
type Option func(*config)

type config struct {
	backend     gpuworker.BackendFactory
	utilization float64
	logger      *slog.Logger
	spin        time.Duration
	layout      messages.Layout
}

// DefaultGPUMemoryUtilization is the default fraction of the device's total
// memory the manager may hold (vLLM's default too).
const DefaultGPUMemoryUtilization = 0.90

func defaultConfig() config {
	return config{
		backend:     gpuworker.BackendConfig{}.Factory(),
		utilization: DefaultGPUMemoryUtilization,
		logger:      slog.Default(),
		layout:      messages.LayoutPooled,
	}
}

// WithBackend selects the backend: hostsim (the default) or cuda.
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
// other processes hold counts against it. Default 0.90.
func WithGPUMemoryUtilization(f float64) Option { return func(c *config) { c.utilization = f } }

// WithLogger routes gpuarena's logs, and protoactor-go's warnings and errors,
// to l. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithArenaLayout chooses how BuildArena allocates: LayoutPooled (the
// default: one allocation, buffers at 256-byte-aligned offsets) or
// LayoutDiscrete (one allocation per buffer, for memory-checker runs).
func WithArenaLayout(l Layout) Option { return func(c *config) { c.layout = l } }

// WithDispatcherSpin makes the GPU thread poll for work for d before it parks
// (see gpuworker.WithSpin). Default 0.
func WithDispatcherSpin(d time.Duration) Option { return func(c *config) { c.spin = d } }

func (c config) validate() error {
	if !(c.utilization > 0 && c.utilization <= 1) {
		return fmt.Errorf("gpu_memory_utilization %v: %w: want a fraction in (0, 1]", c.utilization, ErrInvalidOption)
	}
	if c.spin < 0 {
		return fmt.Errorf("dispatcher spin %v: %w: want ≥ 0", c.spin, ErrInvalidOption)
	}
	if c.layout != messages.LayoutPooled && c.layout != messages.LayoutDiscrete {
		return fmt.Errorf("arena layout %q: %w: want %q or %q", c.layout, ErrInvalidOption, messages.LayoutPooled, messages.LayoutDiscrete)
	}
	if c.backend == nil {
		return fmt.Errorf("backend factory: %w: nil", ErrInvalidOption)
	}
	if c.logger == nil {
		return fmt.Errorf("logger: %w: nil", ErrInvalidOption)
	}
	return nil
}
