// Package gpuarena manages the GPU memory of an LLM inference server: it sizes
// every intermediate tensor of a forward pass from a Hugging Face config.json
// and the serving options (package arena), allocates them once through the
// one goroutine that owns the GPU (package gpuworker), lends them to one
// forward step at a time, and releases every byte at the end.
//
// An embedder uses this package, package arena (the sizing) and package
// device (what it gets back: the built arena, a forward step's Device handle,
// device pointers, the ledger, the stats and the release report). The
// package example (Example, in example_test.go, run by go test) is the main
// job in a few lines:
//
//	_, plan, err := llamaPlanFor() // arena.LoadConfig + arena.PlanFor at max_batch_tokens 512
//	m, err := gpuarena.New()        // the simulated device; WithBackend for cuda
//	defer m.Close()
//	if _, err := m.BuildArena(ctx, plan); err != nil { ... }
//	tokens := binary.LittleEndian.AppendUint32(nil, 128000)
//	_, err = m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
//		return dev.CopyHtoD(a.Ptr(arena.TokenIDs), tokens)
//	})
//	rep, err := m.Release(ctx) // released 258476032 bytes in 1 allocation
//
// ExampleNew, Example_preflight (arena.Fit from the manager's own device
// memory), ExampleManager_BuildArena, ExampleManager_Forward and
// ExampleManager_Release show one call each.
//
// Errors are sentinels re-exported here (ErrOutOfMemory, ErrClosed, ...) for
// errors.Is, and typed errors (*gpuworker.OutOfMemoryError,
// *arena.OptionError, *arena.ConfigError) for errors.As. The actors behind the
// manager (protoactor-go) stay hidden.
package gpuarena
