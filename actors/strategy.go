package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Restart limits of RestartStrategy: a supervisor that fails more than
// MaxRestarts times within RestartWindow is stopped instead of restarted.
const (
	MaxRestarts   = 10
	RestartWindow = 10 * time.Second
)

// RestartStrategy is how the arena, slab and release supervisors are
// supervised: by their parent (Spawn), one for one, and the directive for
// any failure is restart. A restart loses nothing: the supervisors hold no
// state the GPU actor's ledger does not also hold, and each rebuilds its
// state from the ledger when it starts (see rebuild.go). A supervisor that
// fails more than MaxRestarts times within RestartWindow is stopped; calls to
// it then fail with ErrSupervisorStopped.
//
// The GPU actor is not supervised this way: it is spawned under a guardian
// whose directive is stop (gpuworker.Start), since a restart would drop its
// ledger (design.md §1).
func RestartStrategy() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(MaxRestarts, RestartWindow, func(any) actor.Directive { return actor.RestartDirective })
}
