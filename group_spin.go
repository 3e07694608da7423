package gpuarena

import (
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// GroupSpin is the dispatcher spin (WithDispatcherSpin) NewGroup gives each
// of ranks GPU threads on a host of procs Ps (GOMAXPROCS): the thread
// budget of several devices.
//
// A polled round trip holds two Ps for the spin: the caller polling for its
// reply and the GPU thread spinning for the next request
// (gpuworker/internal/pinned: SendAndPoll, poll). A group step sends to every
// rank at once, so ranks polled round trips want 2·ranks Ps at the same
// moment; when the rest of the program wants a P too, a spinning thread
// keeps it waiting, and the thread it waits for may be the one the spin
// waits for: a spin meant to save a wake-up costs a time slice instead. So
// every rank spins (gpuworker.DefaultSpin, as a lone Manager does) while
// the 2·ranks Ps fit the host (2·ranks ≤ procs), and none does otherwise:
// callers and GPU threads then park, and each round trip pays its thread
// wake-ups. 8 ranks spin on the 16-core H200 host and park from 9; one
// rank spins from 2 Ps, as a lone Manager does.
//
// Measured on the H200 host (16 cores; BenchmarkGroupRoundTrip and
// BenchmarkGroupStep, group_bench_test.go, with one goroutine of other
// work running; docs/performance/several-gpus.md): 8 ranks spinning make
// a median 3.61 M round trips/s, 6.4× one rank's 0.57 M, where parked
// they made 0.36–0.40 M (0.7–0.9×); their empty group step takes about
// the same spinning or parked (p50 86–165 µs against 91–120 µs), as does
// the other goroutine's work. On 2 cores, where the Ps run out, 8 ranks'
// step took a p50 of 166–196 µs spinning and 100–182 µs parked.
func GroupSpin(ranks, procs int) time.Duration {
	if ranks < 1 || 2*ranks > procs {
		return 0
	}
	return gpuworker.DefaultSpin
}
