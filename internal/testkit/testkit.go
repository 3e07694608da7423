// Package testkit holds what gpuarena's test packages share: a silent
// logger, an actor system that is shut down with the test, and a small
// hand-made plan. Only tests import it.
package testkit

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpuarena/gpuarena/arena"
)

// MiB is 2²⁰ bytes.
const MiB = 1 << 20

// Discard is a logger that writes nothing.
var Discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// NewActorSystem returns a protoactor-go actor system that logs nothing,
// keeps its dead-letter throttle goroutine for a millisecond only, and is
// shut down when the test ends.
func NewActorSystem(t testing.TB) *actor.ActorSystem {
	t.Helper()
	s := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return Discard }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond),
	)
	t.Cleanup(s.Shutdown)
	return s
}

// SmallPlan is a hand-made plan of three present buffers, in BufferID order
// hidden_states (1 MiB), logits (3 MiB) and norm_unit_w (2 MiB), and one slab
// named slab of 4 MiB.
func SmallPlan(slab string) *arena.Plan {
	p := &arena.Plan{ModelType: "test"}
	for i := range p.Buffers {
		p.Buffers[i] = arena.Buffer{ID: arena.BufferID(i), Absent: "not in the test plan"}
	}
	p.Buffers[arena.HiddenStates] = arena.Buffer{ID: arena.HiddenStates, DType: arena.BF16, Shape: []int64{512, 1024}, Bytes: 1 * MiB}
	p.Buffers[arena.NormUnitW] = arena.Buffer{ID: arena.NormUnitW, DType: arena.BF16, Shape: []int64{1024 * 1024}, Bytes: 2 * MiB}
	p.Buffers[arena.Logits] = arena.Buffer{ID: arena.Logits, DType: arena.BF16, Shape: []int64{512, 3072}, Bytes: 3 * MiB}
	p.Slabs = []arena.SlabSpec{{Name: slab, Bytes: 4 * MiB}}
	p.BufferBytes, p.SlabBytes, p.TotalBytes = 6*MiB, 4*MiB, 10*MiB
	return p
}

// Eventually calls check until it returns nil, each try on a 20 ms tick
// after the one before, and returns how long that took; past within it
// fails the test with what and check's last error. It is for state another
// goroutine or process reaches on its own (gossip, a drain), which the test
// cannot wait for on a channel.
func Eventually(t testing.TB, within time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		<-tick.C
	}
}
