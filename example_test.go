package gpuarena_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// quietLogs keeps the examples' output to what they print.
var quietLogs = gpuarena.WithLogger(slog.New(slog.DiscardHandler))

// llamaPlanFor plans Llama-3.1-8B's arena at max_batch_tokens 512.
func llamaPlanFor() (*arena.ModelConfig, *arena.Plan, error) {
	cfg, err := arena.LoadConfig("examples/configs/llama-3.1-8b.json")
	if err != nil {
		return nil, nil, err
	}
	opts := arena.DefaultOptions()
	opts.MaxBatchTokens = 512
	plan, err := arena.PlanFor(cfg, opts)
	return cfg, plan, err
}

// The main job in a few lines: size the arena from a config.json, build it
// through the GPU thread, run a forward step on it, release every byte.
func Example() {
	ctx := context.Background()
	_, plan, err := llamaPlanFor()
	if err != nil {
		panic(err)
	}
	m, err := gpuarena.New(quietLogs) // the simulated device; WithBackend for cuda
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if _, err := m.BuildArena(ctx, plan); err != nil {
		panic(err)
	}
	tokens := binary.LittleEndian.AppendUint32(nil, 128000) // <|begin_of_text|>
	_, err = m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		return dev.CopyHtoD(a.Ptr(arena.TokenIDs), tokens)
	})
	if err != nil {
		panic(err)
	}
	rep, err := m.Release(ctx)
	fmt.Println("released", rep.Bytes, "bytes in", rep.Freed, "allocation:", err)
	l, _ := m.Ledger(ctx)
	fmt.Println("held after release:", l.Counters.CurrentBytes)
	// Output:
	// released 258476032 bytes in 1 allocation: <nil>
	// held after release: 0
}

// New opens a device through its own GPU thread. With no backend option it
// is a simulated H200; the budget is gpu_memory_utilization (0.90 by
// default) of its total.
func ExampleNew() {
	m, err := gpuarena.New(quietLogs,
		gpuarena.WithBackend(gpuworker.BackendConfig{HostSim: gpuworker.HostSimConfig{TotalBytes: 80 << 30}}),
		gpuarena.WithGPUMemoryUtilization(0.95))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	fmt.Println(m.Device().Backend, m.Device().TotalBytes, m.Budget())
	// Output: hostsim 85899345920 81604378624
}

// The preflight prices the weights, the arena, the reserve and one
// max_seq_len sequence's KV cache against the budget, before anything is
// allocated, from the device's own memory figures.
func Example_preflight() {
	ctx := context.Background()
	cfg, plan, err := llamaPlanFor()
	if err != nil {
		panic(err)
	}
	m, err := gpuarena.New(quietLogs,
		gpuarena.WithBackend(gpuworker.BackendConfig{HostSim: gpuworker.HostSimConfig{TotalBytes: 24 << 30}}))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	free, total, err := m.MemInfo(ctx)
	if err != nil {
		panic(err)
	}
	r, err := arena.Fit(plan, cfg, arena.DeviceMemory{TotalBytes: total, FreeBytes: free}, arena.FitOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("fits:", r.Fits, "weights:", r.WeightBytes, "KV blocks:", r.KVBlocks, "tokens:", r.KVTokens)
	// Output: fits: true weights: 16060522496 KV blocks: 2765 tokens: 44240
}

// BuildArena allocates every buffer of the plan, all or nothing: one pooled
// allocation by default, one per buffer with LayoutDiscrete.
func ExampleManager_BuildArena() {
	ctx := context.Background()
	_, plan, err := llamaPlanFor()
	if err != nil {
		panic(err)
	}
	m, err := gpuarena.New(quietLogs, gpuarena.WithArenaLayout(device.LayoutDiscrete))
	if err != nil {
		panic(err)
	}
	defer m.Close()
	a, err := m.BuildArena(ctx, plan)
	if err != nil {
		panic(err)
	}
	l, _ := m.Ledger(ctx)
	fmt.Println("logits:", a.Bytes(arena.Logits), "bytes; allocations:", l.Counters.Allocations, "holding", l.Counters.CurrentBytes)
	// Output: logits: 131334144 bytes; allocations: 16 holding 258476032
}

// Forward runs one step at a time on the GPU thread; the step's Device is
// valid only on the step's own goroutine, while it runs, and checks every
// range against the ledger.
func ExampleManager_Forward() {
	ctx := context.Background()
	_, plan, err := llamaPlanFor()
	if err != nil {
		panic(err)
	}
	m, err := gpuarena.New(quietLogs)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if _, err := m.BuildArena(ctx, plan); err != nil {
		panic(err)
	}
	got := make([]byte, 4)
	_, err = m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		p := a.Ptr(arena.TokenIDs)
		if err := dev.Memset(p, 0x2a, 4); err != nil {
			return err
		}
		if err := dev.CopyDtoH(got, p); err != nil {
			return err
		}
		return dev.Memset(p, 0, a.Bytes(arena.TokenIDs)+1) // one byte past the buffer
	})
	fmt.Println(got, errors.Is(err, gpuarena.ErrOutOfRange))
	// Output: [42 42 42 42] true
}

// Release frees the arena and its slabs: exhaustive, idempotent, and later
// steps get ErrReleased.
func ExampleManager_Release() {
	ctx := context.Background()
	_, plan, err := llamaPlanFor()
	if err != nil {
		panic(err)
	}
	m, err := gpuarena.New(quietLogs)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if _, err := m.BuildArena(ctx, plan); err != nil {
		panic(err)
	}
	first, err := m.Release(ctx)
	fmt.Println("first release:", first.Freed, "allocation,", first.Bytes, "bytes,", err)
	second, err := m.Release(ctx)
	fmt.Println("second release:", second.Freed, "allocations,", err)
	_, err = m.Forward(ctx, func(*device.Arena, device.Device) error { return nil })
	fmt.Println("a step after it:", errors.Is(err, gpuarena.ErrReleased))
	// Output:
	// first release: 1 allocation, 258476032 bytes, <nil>
	// second release: 0 allocations, <nil>
	// a step after it: true
}
