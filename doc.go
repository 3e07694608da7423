// Package gpuarena manages the GPU memory of an LLM inference server: it sizes
// every intermediate tensor of a forward pass from a Hugging Face config.json
// and the serving options (package arena), allocates them once through the
// one goroutine that owns the GPU (package gpuworker), lends them to one
// forward step at a time, and releases every byte at the end.
//
// An embedder uses this package and package arena:
//
//	cfg, err := arena.LoadConfig("config.json")
//	if err != nil { ... }
//	plan, err := arena.PlanFor(cfg, arena.DefaultOptions())
//	if err != nil { ... }
//	m, err := gpuarena.New(gpuarena.WithGPUMemoryUtilization(0.9))
//	if err != nil { ... }
//	defer m.Close()
//	if _, err := m.BuildArena(ctx, plan); err != nil { ... }
//	_, err = m.Forward(ctx, func(a *gpuarena.Arena, dev gpuarena.Device) error {
//		return dev.CopyHtoD(a.Ptr(arena.TokenIDs), tokenIDs) // tokenIDs: []byte, little-endian u32
//	})
//
// Errors are sentinels re-exported here (ErrOutOfMemory, ErrClosed, ...) for
// errors.Is, and typed errors (*gpuworker.OutOfMemoryError,
// *arena.OptionError, *arena.ConfigError) for errors.As. The actors behind the
// manager (protoactor-go) stay hidden.
package gpuarena
