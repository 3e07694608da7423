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
// 3.3–4.0 M round trips/s, a median 6.4× one rank's 0.50–0.61 M, and
// parked 0.36–0.40 M; their empty group step takes a p50 of 86–131 µs
// spinning and 91–120 µs parked, and the other goroutine's work is the
// same either way (568–617 M iterations/s). On 2 cores, where the Ps run
// out, 8 ranks' step takes 477 µs spinning and 77–101 µs parked.
func GroupSpin(ranks, procs int) time.Duration {
	if ranks < 1 || 2*ranks > procs {
		return 0
	}
	return gpuworker.DefaultSpin
}
