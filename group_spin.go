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
// 2·ranks Ps leave one for the rest of the program (2·ranks < procs), and
// none does otherwise: callers and GPU threads then park, and each round
// trip pays its thread wake-ups. 8 ranks spin from 17 Ps and park on the
// 16-core H200 host; one rank spins from 3.
//
// Measured by BenchmarkGroupStep (group_bench_test.go) with one goroutine
// of other work running: on 2 cores one rank's empty step takes a p50 of
// 104 µs spinning and 10 µs parked, 8 ranks' 477 µs spinning and 77–101 µs
// parked.
func GroupSpin(ranks, procs int) time.Duration {
	if ranks < 1 || 2*ranks >= procs {
		return 0
	}
	return gpuworker.DefaultSpin
}
