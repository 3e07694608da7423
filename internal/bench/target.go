package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// Op is the kind of round trip a Target makes.
type Op string

// The round trips.
const (
	// OpEmpty reaches the device thread and comes back without calling the
	// backend (direct: a no-op function call; gpuarena: messages.Ping).
	OpEmpty Op = "empty"
	// OpMemInfo asks the backend for the device's free and total memory
	// (cuMemGetInfo).
	OpMemInfo Op = "meminfo"
)

// Ops are the round trips the dispatch and contention suites measure.
var Ops = []Op{OpEmpty, OpMemInfo}

// Target is one way of reaching the device thread, started.
type Target interface {
	// Exec runs body with a function that makes one round trip of the given
	// kind. Body may call it from many goroutines when Concurrent is true;
	// otherwise only from the goroutine body runs on (for direct, the device
	// thread itself).
	Exec(body func(call func(Op) error) error) error
	// Concurrent reports whether call may be used from many goroutines.
	Concurrent() bool
	// Close stops the target and closes its backend, on the device thread.
	Close() error
}

// Kind names a Target implementation.
type Kind string

// The target kinds, in the order the suites measure them.
const (
	KindDirect     Kind = "direct"
	KindChanWorker Kind = "chan-worker"
	KindProtoNaive Kind = "protoactor-naive"
	KindGPUArena   Kind = "gpuarena"
)

// Kinds are every target kind; ConcurrentKinds those the contention suite
// measures (direct has no clients but the device thread).
var (
	Kinds           = []Kind{KindDirect, KindChanWorker, KindProtoNaive, KindGPUArena}
	ConcurrentKinds = []Kind{KindChanWorker, KindProtoNaive, KindGPUArena}
)

// Subject is a target to start: its kind and, for gpuarena, the dispatcher
// spin (gpuworker.WithSpin).
type Subject struct {
	Kind Kind
	Spin time.Duration
}

// Subjects lists a subject per kind, gpuarena once per distinct spin, in
// increasing order.
func Subjects(kinds []Kind, spins []time.Duration) []Subject {
	spins = slices.Compact(slices.Sorted(slices.Values(spins)))
	var out []Subject
	for _, k := range kinds {
		if k != KindGPUArena {
			out = append(out, Subject{Kind: k})
			continue
		}
		for _, s := range spins {
			out = append(out, Subject{Kind: k, Spin: s})
		}
	}
	return out
}

// Name names the subject in a table: its kind, and for gpuarena its spin
// ("gpuarena spin=20µs").
func (s Subject) Name() string {
	if s.Kind == KindGPUArena {
		return fmt.Sprintf("%s spin=%v", s.Kind, s.Spin)
	}
	return string(s.Kind)
}

// Start starts the subject on a fresh backend made by f (on the subject's
// device thread).
func (s Subject) Start(f gpuworker.BackendFactory) (Target, error) {
	switch s.Kind {
	case KindDirect:
		return newDirect(f)
	case KindChanWorker:
		return newChanWorker(f)
	case KindProtoNaive:
		return newProtoNaive(f)
	case KindGPUArena:
		return newGPUArena(f, s.Spin)
	default:
		return nil, fmt.Errorf("bench: unknown target %q", s.Kind)
	}
}

// noop is the empty operation of the targets that call a function on the
// device thread. It is a variable so the call is not inlined away.
var noop = func() error { return nil }

// memInfo calls the backend's MemInfo and drops the figures.
func memInfo(b gpuworker.Backend) error {
	_, _, err := b.MemInfo()
	return err
}

// backendOp is one round trip's work on the device thread.
func backendOp(b gpuworker.Backend, op Op) error {
	switch op {
	case OpEmpty:
		return noop()
	case OpMemInfo:
		return memInfo(b)
	default:
		return fmt.Errorf("bench: unknown op %q", op)
	}
}
