package actors

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// The states of a forward step as its caller and the GPU thread see it.
const (
	stepQueued int32 = iota
	stepStarted
	stepGivenUp
)

// stepState decides, race-free, between a caller that gives up on a forward
// step and the GPU thread that starts it: whichever moves it out of
// stepQueued first wins. A step its caller gave up on never starts; a step
// that started is waited for, because it may use the caller's memory.
type stepState struct{ v atomic.Int32 }

// guard wraps step so that it runs only if its caller has not given up and
// the manager has not started to close (cfg.refusing: Supervisors.Drain).
func (st *stepState) guard(ctx context.Context, cfg config, step messages.ArenaStep) messages.ArenaStep {
	return func(a *device.Arena, dev device.Device) error {
		if err := cfg.refusing("forward"); err != nil && st.v.CompareAndSwap(stepQueued, stepGivenUp) {
			return err
		}
		if !st.v.CompareAndSwap(stepQueued, stepStarted) {
			return fmt.Errorf("forward: %w: its caller gave up before it started; it did not run", context.Cause(ctx))
		}
		return step(a, dev)
	}
}

// giveUp reports whether the caller gave up in time: false when the step
// has already started.
func (st *stepState) giveUp() bool { return st.v.CompareAndSwap(stepQueued, stepGivenUp) }
