package gpuworker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/bench"
)

// The benchmarks here measure a round trip to the device thread, alone and
// under contention, for gpuarena's worker and its peers (internal/bench), on
// a simulated H200. Each reports ns/op as the mean latency of one round trip
// (not the wall time divided by b.N, which under contention is the inverse of
// the throughput), p50-ns and p99-ns, and ops/s across all clients.
//
//	go test ./gpuworker -run '^$' -bench . -count 6

// benchSpins are the dispatcher spins the gpuarena subjects are measured at.
var benchSpins = []time.Duration{0, 5 * time.Microsecond, 20 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond}

// benchClients are the client counts of BenchmarkContention.
var benchClients = []int{1, 16, 256, 4096}

// hostsim opens a fresh simulated H200.
func hostsim() (gpuworker.Backend, error) { return gpuworker.NewHostSim(gpuworker.HostSimConfig{}) }

// BenchmarkRoundTrip is one client's round trip, empty and mem-info, for
// every subject: direct (the floor), chan-worker (gorgonia cu's Ctx.Do),
// protoactor-naive and gpuarena at each spin.
func BenchmarkRoundTrip(b *testing.B) {
	for _, s := range bench.Subjects(bench.Kinds, benchSpins) {
		b.Run(s.Name(), func(b *testing.B) {
			for _, op := range bench.Ops {
				b.Run(string(op), func(b *testing.B) { measure(b, s, op, 1) })
			}
		})
	}
}

// BenchmarkContention is the round trip from 1, 16, 256 and 4096 concurrent
// clients (b.N round trips in all), for the subjects that take concurrent
// clients.
func BenchmarkContention(b *testing.B) {
	for _, s := range bench.Subjects(bench.ConcurrentKinds, benchSpins) {
		b.Run(s.Name(), func(b *testing.B) {
			for _, op := range bench.Ops {
				for _, c := range benchClients {
					b.Run(fmt.Sprintf("%s/clients=%d", op, c), func(b *testing.B) { measure(b, s, op, c) })
				}
			}
		})
	}
}

// measure starts s, warms it up, makes b.N round trips of op from clients
// goroutines and reports the latencies and the throughput.
func measure(b *testing.B, s bench.Subject, op bench.Op, clients int) {
	t, err := s.Start(hostsim)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := t.Close(); err != nil {
			b.Error(err)
		}
	}()
	var sum bench.Summary
	err = t.Exec(func(call func(bench.Op) error) error {
		do := func() error { return call(op) }
		if _, err := bench.Drive(1, bench.Budget{Ops: bench.WarmupOps}, do); err != nil {
			return err
		}
		b.ResetTimer()
		sum, err = bench.Drive(clients, bench.Budget{Ops: b.N}, do)
		b.StopTimer()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	bench.ReportMetrics(b, sum, "")
}
