package gpuarena_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// The group benchmarks run on a simulated machine of N H200s
// (gpuworker.ParseMachine). Their numbers depend on the host's cores: a
// group of N ranks wants 2·N of them to spin (GroupSpin).
//
//	go test . -run '^$' -bench Group -benchtime 2000x -count 3

// benchGroup opens a group of n simulated H200s with the small plan's arena
// on every rank, closed when the benchmark ends.
func benchGroup(b *testing.B, n int, opts ...gpuarena.GroupOption) *gpuarena.Group {
	b.Helper()
	c, err := gpuworker.ParseMachine(fmt.Sprint(n))
	if err != nil {
		b.Fatal(err)
	}
	mach, err := gpuworker.NewHostSimMachine(c)
	if err != nil {
		b.Fatal(err)
	}
	g, err := gpuarena.NewGroup(append([]gpuarena.GroupOption{gpuarena.WithDeviceFactories(mach.Factories()...), gpuarena.WithRankOptions(benchQuiet)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	if _, err := g.BuildArenas(context.Background(), plans(n)); err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkGroupRoundTrip is the aggregate throughput of round trips to the
// GPU threads (Manager.MemInfo: one request, one driver call) with one
// caller per rank, each to its own rank, at 1 and 8 devices (8 with
// GroupSpin's choice, which spins where every rank's two threads have a
// core and parks elsewhere, and with every rank spinning): ns/op is the
// wall time per round trip of all ranks together, round-trips/s its
// inverse. The callers claim round trips grain at a time, as testing.PB
// does, so that the benchmark's own counter is not a cache line every
// round trip of every rank contends for.
func BenchmarkGroupRoundTrip(b *testing.B) {
	for _, c := range []struct {
		n    int
		name string
		opts []gpuarena.GroupOption
	}{
		{1, "policy", nil},
		{8, "policy", nil},
		{8, "spin", []gpuarena.GroupOption{gpuarena.WithGroupSpin(gpuworker.DefaultSpin)}},
	} {
		n := c.n
		b.Run(fmt.Sprintf("devices=%d/%s", n, c.name), func(b *testing.B) {
			g := benchGroup(b, n, c.opts...)
			ctx := context.Background()
			const grain = 100
			var next atomic.Int64
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() {
					for {
						hi := next.Add(grain)
						lo := hi - grain
						if lo >= int64(b.N) {
							return
						}
						for range min(hi, int64(b.N)) - lo {
							if _, _, err := g.Rank(r).MemInfo(ctx); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "round-trips/s")
		})
	}
}

// BenchmarkGroupStep runs empty group steps one after another at 1, 2, 4
// and 8 devices, with GroupSpin's choice (policy), with every rank
// spinning (spin: gpuworker.DefaultSpin whatever the cores) and with none
// (park), and reports
// the step's p50 and p99 beside ns/op, and background-Mops/s: how much
// work one other goroutine got done meanwhile (millions of loop
// iterations per second), which spinning threads take CPU from.
func BenchmarkGroupStep(b *testing.B) {
	empty := func(int, *device.Arena, device.Device) error { return nil }
	for _, n := range []int{1, 2, 4, 8} {
		for _, mode := range []struct {
			name string
			opts []gpuarena.GroupOption
		}{
			{"policy", nil},
			{"spin", []gpuarena.GroupOption{gpuarena.WithGroupSpin(gpuworker.DefaultSpin)}},
			{"park", []gpuarena.GroupOption{gpuarena.WithGroupSpin(0)}},
		} {
			b.Run(fmt.Sprintf("devices=%d/%s", n, mode.name), func(b *testing.B) {
				g := benchGroup(b, n, mode.opts...)
				ctx := context.Background()
				bg := startBackground()
				lat := make([]time.Duration, 0, b.N)
				for b.Loop() {
					t0 := time.Now()
					if _, err := g.Forward(ctx, empty); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				b.ReportMetric(bg.stop()/1e6, "background-Mops/s")
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
			})
		}
	}
}

// background is a goroutine that counts loop iterations until stopped.
type background struct {
	quit  chan struct{}
	done  chan float64
	start time.Time
}

func startBackground() *background {
	bg := &background{quit: make(chan struct{}), done: make(chan float64, 1), start: time.Now()}
	go func() {
		var ops, x uint64
		for {
			select {
			case <-bg.quit:
				bg.done <- float64(ops) / time.Since(bg.start).Seconds()
				sinkOps.Store(x)
				return
			default:
			}
			for i := range uint64(1000) {
				x = x*6364136223846793005 + i
			}
			ops += 1000
		}
	}()
	return bg
}

// sinkOps keeps the background loop's result alive.
var sinkOps atomic.Uint64

// stop ends the goroutine and returns its iterations per second.
func (bg *background) stop() float64 {
	close(bg.quit)
	return <-bg.done
}
