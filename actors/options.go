package actors

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// Option configures Spawn.
type Option func(*config)

type config struct {
	hook   Hook
	logger *slog.Logger
	// draining is closed by Supervisors.Drain: forward steps, builds and
	// carves that reach a supervisor from then on are refused, not started.
	draining <-chan struct{}
}

// refusing returns ErrClosed, naming what is refused, once Drain was called.
func (c config) refusing(what string) error {
	select {
	case <-c.draining:
		return fmt.Errorf("%s: %w: the manager started to close before it started", what, gpuworker.ErrClosed)
	default:
		return nil
	}
}

func defaultConfig() config {
	return config{hook: func(string, Point) {}, logger: slog.New(slog.DiscardHandler)}
}

// Point names a step in a supervisor's work where a Hook is called.
type Point string

// The points at which the supervisors call their Hook.
const (
	// PointStarted: a supervisor has rebuilt its state from the ledger (on
	// its first start and after every restart).
	PointStarted Point = "started"
	// PointReceive: a supervisor got a message other than a lifecycle one,
	// and has not yet handled it.
	PointReceive Point = "receive"
	// PointBuilt: the GPU actor has made every allocation of a build and
	// tagged them as a built arena in the ledger; the arena is not yet handed
	// to the slab and release supervisors nor answered.
	PointBuilt Point = "built"
	// PointBuildFailed: the GPU actor refused a build and rolled it back;
	// what the rollback could not free is not yet freed.
	PointBuildFailed Point = "build failed"
	// PointForward: the arena supervisor is about to send a forward step.
	PointForward Point = "forward"
	// PointCarved: the slab supervisor has recorded a carve in the ledger,
	// not yet answered it.
	PointCarved Point = "carved"
	// PointReleased: the release supervisor has freed one resource and has
	// more to go.
	PointReleased Point = "released one"
)

// Hook is called by the supervisors at each Point of their work, on the
// supervisor's own goroutine, with the supervisor's name ("arena", "slab" or
// "release"). It lets a test do what a bug could do there — panic — and
// check that supervision restarts the supervisor with nothing lost.
// Production code sets none.
type Hook func(supervisor string, p Point)

// WithHook sets the hook (default: none).
func WithHook(h Hook) Option {
	return func(c *config) {
		if h != nil {
			c.hook = h
		}
	}
}

// WithLogger sets the logger the supervisors report panics and restarts to
// (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// received calls the hook with PointReceive for every message but the
// actor's lifecycle messages.
func (c config) received(supervisor string, msg any) {
	switch msg.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		c.hook(supervisor, PointReceive)
	}
}
