package gpuarena_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// A group over a simulated 4×H200 machine: one GPU actor per device, an
// arena on every rank, a lockstep step, the ranks' ledgers, and Close.
func ExampleNewGroup() {
	ctx := context.Background()
	mc, err := gpuworker.ParseMachine("4xh200")
	if err != nil {
		panic(err)
	}
	mach, err := gpuworker.NewHostSimMachine(mc)
	if err != nil {
		panic(err)
	}
	g, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(mach.Factories()...),
		gpuarena.WithRankOptions(gpuarena.WithLogger(slog.New(slog.DiscardHandler))))
	if err != nil {
		panic(err)
	}
	defer g.Close()
	cfg, err := arena.LoadConfig("examples/configs/llama-3.1-8b.json")
	if err != nil {
		panic(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 512})
	if err != nil {
		panic(err)
	}
	plans := make([]*arena.Plan, g.Ranks()) // one per rank: arena.PlanRanks' shares, or the same plan
	for r := range plans {
		plans[r] = plan
	}
	if _, err := g.BuildArenas(ctx, plans); err != nil {
		panic(err)
	}
	if _, err := g.Forward(ctx, func(rank int, a *device.Arena, dev device.Device) error {
		return dev.Memset(a.Ptr(arena.HiddenStates), byte(rank), 4)
	}); err != nil {
		panic(err)
	}
	ledgers, err := g.Ledgers(ctx)
	if err != nil {
		panic(err)
	}
	for r, d := range g.Devices() {
		fmt.Printf("rank %d: device %d (%s), %d B held\n", r, d.Ordinal, d.Name, ledgers[r].Counters.CurrentBytes)
	}
	// Output:
	// rank 0: device 0 (hostsim NVIDIA H200), 258476032 B held
	// rank 1: device 1 (hostsim NVIDIA H200), 258476032 B held
	// rank 2: device 2 (hostsim NVIDIA H200), 258476032 B held
	// rank 3: device 3 (hostsim NVIDIA H200), 258476032 B held
}
