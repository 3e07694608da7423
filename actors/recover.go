package actors

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/gpuarena/gpuarena/internal/messages"
)

// answerPanic is deferred by every supervisor's Receive. When the handler
// panics it answers the request being handled with ErrSupervisorPanic, so
// its caller is not left waiting, then panics again so that the supervisor's
// parent restarts it (RestartStrategy). Reply channels have room for one
// reply; a request already answered is not answered twice.
func answerPanic(name string, logger *slog.Logger, msg any) {
	r := recover()
	if r == nil {
		return
	}
	err := fmt.Errorf("%s supervisor: %w: %v", name, ErrSupervisorPanic, r)
	logger.Error("supervisor panicked; restarting it", "supervisor", name, "message", fmt.Sprintf("%T", msg), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
	switch m := msg.(type) {
	case *messages.BuildArena:
		trySend(m.Reply, messages.BuildArenaReply{Err: err})
	case *messages.RunForward:
		trySend(m.Reply, messages.ForwardReply{Err: err})
	case *messages.CarveSlab:
		trySend(m.Reply, messages.CarveSlabReply{Err: err})
	case *messages.Release:
		trySend(m.Reply, messages.ReleaseReply{Err: err})
	}
	panic(r)
}

// trySend sends v on ch unless ch is nil or full.
func trySend[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}
