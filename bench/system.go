package bench

import (
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// quiet discards the logs of the actor systems and workers the targets start.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newSystem returns an actor system that logs nothing; its dead-letter
// throttle keeps a goroutine for only a millisecond after Shutdown.
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
}
