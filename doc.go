// Package gpuarena manages the GPU memory of an LLM inference server: it sizes
// every intermediate tensor of a forward pass from a Hugging Face config.json
// and the serving options (package arena), allocates them once through the
// one goroutine that owns the GPU (package gpuworker), lends them to one
// forward step at a time, and releases every byte at the end.
//
// An embedder uses only this package:
//
//	m, err := gpuarena.New(gpuarena.WithGPUMemoryUtilization(0.9))
//	defer m.Close()
//	cfg, _ := arena.LoadConfig("config.json")
//	plan, _ := arena.PlanFor(cfg, arena.DefaultOptions())
//	a, _ := m.BuildArena(ctx, plan)
//	m.Forward(ctx, func(a *gpuarena.Arena, dev gpuarena.Device) error { ... })
//
// The actors behind it (protoactor-go) stay hidden.
package gpuarena
