package gpuarena_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/bench"
)

// The benchmarks here measure the facade on a simulated H200: building and
// releasing an arena through the actors against the same driver calls made
// directly on a locked thread, and carving a slab. ns/op is the mean of the
// measured phase (BenchmarkBuildArena: the build; release-ns, release-p50-ns
// and release-p99-ns are the release of the same cycles), beside p50-ns and
// p99-ns.
//
//	go test . -run '^$' -bench . -count 6

// benchModels are the build benchmarks' models (examples/configs/*.json).
var benchModels = []string{"qwen3-next-80b-a3b-thinking", "deepseek-v3", "llama-3.1-8b"}

func benchPlan(b *testing.B, model string, opts arena.Options) *arena.Plan {
	b.Helper()
	cfg, err := arena.LoadConfig("examples/configs/" + model + ".json")
	if err != nil {
		b.Fatal(err)
	}
	plan, err := arena.PlanFor(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	return plan
}

// benchQuiet discards the managers' logs.
var benchQuiet = gpuarena.WithLogger(slog.New(slog.DiscardHandler))

func hostsim() (gpuworker.Backend, error) { return gpuworker.NewHostSim(gpuworker.HostSimConfig{}) }

// BenchmarkBuildArena builds and releases each model's arena at
// max_batch_tokens 512 and 8192, pooled and discrete: through the actors
// (Manager.BuildArena + Release, a fresh Manager per cycle, started untimed)
// and as the same driver calls made directly on a locked thread.
func BenchmarkBuildArena(b *testing.B) {
	for _, model := range benchModels {
		for _, m := range []int64{512, 8192} {
			plan := benchPlan(b, model, arena.Options{MaxBatchTokens: m})
			for _, layout := range bench.Layouts {
				name := fmt.Sprintf("%s/M=%d/%s", model, m, layout)
				b.Run(name+"/actor", func(b *testing.B) {
					a := bench.ActorBuild{Factory: hostsim, Plan: plan, Layout: layout, Spin: gpuworker.DefaultSpin}
					clock := bench.CycleClock{BuildIdle: bench.DefaultBuildIdle, SetupIdle: bench.DefaultSetupIdle}
					s := bench.BuildSample{}
					for b.Loop() {
						if err := a.Cycle(&clock, &s); err != nil {
							b.Fatal(err)
						}
					}
					reportBuild(b, s)
				})
				b.Run(name+"/direct", func(b *testing.B) { benchDirectBuild(b, plan, layout) })
			}
		}
	}
}

// benchDirectBuild runs direct build cycles, each on a new locked thread
// with a backend opened there (bench.DirectBuild).
func benchDirectBuild(b *testing.B, plan *arena.Plan, layout device.Layout) {
	d, err := bench.NewDirectBuild(plan, layout)
	if err != nil {
		b.Fatal(err)
	}
	clock := bench.CycleClock{BuildIdle: bench.DefaultBuildIdle, SetupIdle: bench.DefaultSetupIdle}
	s := bench.BuildSample{}
	for b.Loop() {
		if err := d.Cycle(hostsim, &clock, &s); err != nil {
			b.Fatal(err)
		}
	}
	reportBuild(b, s)
}

func reportBuild(b *testing.B, s bench.BuildSample) {
	build, release := s.Summaries()
	bench.ReportMetrics(b, build, "")
	bench.ReportMetrics(b, release, "release-")
}

// BenchmarkCarveSlab carves small regions from Qwen3-Next's row-wise slab
// (fp8_rowwise) through Manager.CarveSlab, from 1 and 16 clients. b.N carves
// must fit in the slab (about 2 GiB: millions of 4 KiB carves).
func BenchmarkCarveSlab(b *testing.B) {
	plan := benchPlan(b, "qwen3-next-80b-a3b-thinking", arena.Options{MaxBatchTokens: 512, FP8Rowwise: true})
	for _, size := range []int64{256, 4096} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("size=%d/clients=%d", size, clients), func(b *testing.B) {
				m, err := gpuarena.New(gpuarena.WithBackendFactory(hostsim), benchQuiet)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				if _, err := m.BuildArena(b.Context(), plan); err != nil {
					b.Fatal(err)
				}
				carve := func() error {
					_, _, err := m.CarveSlab(b.Context(), arena.SlabSSMRowwiseW, size)
					return err
				}
				b.ResetTimer()
				sum, err := bench.Drive(clients, bench.Budget{Ops: b.N}, carve)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				bench.ReportMetrics(b, sum, "")
			})
		}
	}
}
