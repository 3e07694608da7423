package gpuarena_test

import (
	"context"
	"fmt"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// The KV cache the fit priced, allocated: fit gpt-oss-20b on the device,
// build its arena, then its KV cache (full-attention and sliding-window
// groups), and find a block's K and V.
func ExampleManager_BuildKVCache() {
	ctx := context.Background()
	cfg, err := arena.LoadConfig("examples/configs/gpt-oss-20b.json")
	if err != nil {
		panic(err)
	}
	plan, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 512})
	if err != nil {
		panic(err)
	}
	m, err := gpuarena.New(quietLogs)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	fit, err := m.Preflight(ctx, plan, cfg) // before building: it counts what the ledger holds
	if err != nil {
		panic(err)
	}
	if _, err := m.BuildArena(ctx, plan); err != nil {
		panic(err)
	}
	spec, err := arena.NewKVCacheSpec(cfg, fit, arena.KVCacheRequest{}) // the fit's blocks and sequences
	if err != nil {
		panic(err)
	}
	kv, err := m.BuildKVCache(ctx, spec)
	if err != nil {
		panic(err)
	}
	l, _ := m.Ledger(ctx)
	fmt.Println("kv_cache bytes = the fit's:", l.Owners[device.KVCacheOwner].CurrentBytes == fit.KVCacheBytes+fit.StateCacheBytes)
	for _, g := range kv.Groups {
		fmt.Printf("%s: layers %d..%d, %d B per block per layer\n",
			g.Name, g.Layers[0].Layer, g.Layers[len(g.Layers)-1].Layer, g.Layers[0].Planes*g.Layers[0].BlockStride)
	}
	full, _ := kv.Group(arena.KVGroupFullAttention)
	k, v, _ := full.BlockAddr(23, 5) // layer 23, block 5
	base, layer, _ := full.Layer(23)
	fmt.Println("K at base + 5 × block_stride:", k == base+device.DevicePtr(5*layer.BlockStride))
	fmt.Println("V plane_stride after K:", v == k+device.DevicePtr(layer.PlaneStride))
	// Output:
	// kv_cache bytes = the fit's: true
	// kv_full_attention: layers 1..23, 32768 B per block per layer
	// kv_sliding_window: layers 0..22, 32768 B per block per layer
	// K at base + 5 × block_stride: true
	// V plane_stride after K: true
}
