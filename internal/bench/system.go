package bench

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// quiet discards the logs of the actor systems, workers and managers the
// targets start, at every level, before a record is formatted: a Manager
// logs each build at Info, and formatting that line is work the direct
// driver calls do not do.
var quiet = slog.New(slog.DiscardHandler)

// newSystem returns an actor system that logs nothing; its dead-letter
// throttle keeps a goroutine for only a millisecond after Shutdown.
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
}
