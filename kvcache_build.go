package gpuarena

import (
	"context"
	"fmt"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
	"github.com/gpuarena/gpuarena/kvcache"
)

// ErrKVCacheBuilt is returned by a BuildKVCache while a KV cache is built
// (or being built): Release (or Close) frees it first.
var ErrKVCacheBuilt = actors.ErrKVCacheBuilt

// kvZeroHead is the granule BuildKVCache's zero-fill splits a group at: the
// head, a whole number of 2 MiB, then the tail, so a backend that zeroes
// whole pages by giving them back (hostsim's madvise) never writes the
// head, and at most 2 MiB of the tail.
const kvZeroHead = 2 << 20

// BuildKVCache allocates spec's KV cache (arena.NewKVCacheSpec: the fit's
// blocks and sequences, or fewer) on the GPU thread: one allocation per
// group, labelled with the group's name (arena.KVGroup*) and held by
// device.KVCacheOwner, with a ledger view per layer ("<group>.layers.<i>"),
// zero-filled as vLLM's torch.zeros allocation is
// (vllm/v1/worker/gpu_model_runner.py _allocate_kv_cache_tensors). It is
// all or nothing, and the whole cache is checked against the budget before
// the driver is called: a cache that would pass it is refused with an
// *gpuworker.OutOfMemoryError (OverBudget, ShortfallBytes) and nothing
// reaches the device. The ledger then holds spec.Bytes for KVCacheOwner:
// for the fit's counts, the fit's KVCacheBytes + StateCacheBytes.
//
// The returned cache gives each layer's base pointer and strides and the
// address of any block or slot (device.KVCacheGroup.BlockAddr, LatentAddr,
// SlotAddr, StateAddr); a forward step uses them through its Device, which
// checks every range against the ledger (a copy must stay inside one
// layer). With the cache comes its block pool (kvcache.Pool, one group per
// cache group, in the same order), owned by the KV supervisor: KVStep and
// the other KV methods reach it through that actor's mailbox. Release and
// Close free the cache and drop the pool, live sequences and all;
// FreeOwner refuses KVCacheOwner, as it refuses the weights', because the
// manager keeps it. Builds go through the same mailbox: a second one while
// a cache is built or being built is refused.
//
// Errors, with nothing allocated: ErrInvalidValue for a nil spec; the
// spec's own (*arena.KVCacheError, errors.Is arena.ErrKVCacheSpec, or an
// *arena.OverflowError) when it does not add up; an *arena.KVCacheError
// wrapping arena.ErrKVCacheMismatch when the built arena is of another
// model_type or kv_block_size; ErrKVCacheBuilt; ErrOutOfMemory; ErrClosed;
// ErrReentrant; the context's, when it is done before the allocation
// starts.
func (m *Manager) BuildKVCache(ctx context.Context, spec *arena.KVCacheSpec) (*device.KVCache, error) {
	if err := m.worker.CheckCaller(); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if spec == nil {
		return nil, fmt.Errorf("build kv cache: %w: nil spec; build one with arena.NewKVCacheSpec", ErrInvalidValue)
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("build kv cache: %w", err)
	}
	items := kvCacheItems(spec)
	pcfg := poolConfig(spec)
	if err := m.kv.Reserve(ctx); err != nil {
		return nil, fmt.Errorf("build kv cache of %d B: %w", spec.Bytes, err)
	}
	c, pool, err := m.allocKVCache(ctx, spec, items, pcfg)
	if err != nil {
		m.kv.Abort()
		return nil, err
	}
	if err := m.kv.Install(c, pool); err != nil {
		return nil, err // the supervisor broke; Release frees the memory
	}
	m.logger.Info("gpuarena: kv cache built", "model_type", spec.ModelType, "groups", len(spec.Groups), "bytes", spec.Bytes,
		"blocks", spec.Counts.Blocks, "seqs", spec.Seqs)
	return c, nil
}

// allocKVCache allocates a reserved build: one batch through the GPU
// thread, and the block pool over it.
func (m *Manager) allocKVCache(ctx context.Context, spec *arena.KVCacheSpec, items []messages.AllocItem, pcfg kvcache.Config) (*device.KVCache, *kvcache.Pool, error) {
	l, err := m.worker.Ledger(ctx)
	if err != nil {
		return nil, nil, err
	}
	if held := l.Owners[device.KVCacheOwner].CurrentBytes; held > 0 {
		return nil, nil, fmt.Errorf("build kv cache of %d B: %w: the ledger holds %d B for %q; Release frees it", spec.Bytes, ErrKVCacheBuilt, held, device.KVCacheOwner)
	}
	if err := m.checkArenaModel(l, spec); err != nil {
		return nil, nil, err
	}
	pool, err := kvcache.New(pcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("build kv cache: %w", err)
	}
	what := fmt.Sprintf("kv cache (%d groups, %d B)", len(spec.Groups), spec.Bytes)
	ptrs, err := m.worker.AllocBatchChecked(ctx, device.KVCacheOwner, what, items)
	if err != nil {
		return nil, nil, fmt.Errorf("build kv cache: nothing allocated: %w", err)
	}
	c, err := device.NewKVCache(spec, ptrs)
	if err != nil {
		return nil, nil, err // unreachable: one pointer per group, none NULL
	}
	return c, pool, nil
}

// kvCacheItems is one allocation per group of spec, a view per layer, and
// the whole group zero-filled (head and tail, kvZeroHead).
func kvCacheItems(spec *arena.KVCacheSpec) []messages.AllocItem {
	items := make([]messages.AllocItem, len(spec.Groups))
	for i, g := range spec.Groups {
		it := messages.AllocItem{Label: g.Name, Bytes: g.Bytes, Views: make([]messages.PoolView, len(g.Layers))}
		for j, l := range g.Layers {
			it.Views[j] = messages.PoolView{Label: fmt.Sprintf("%s.layers.%d", g.Name, l.Layer), Offset: l.Offset, Bytes: l.Bytes}
		}
		head := g.Bytes - g.Bytes%kvZeroHead
		if head > 0 {
			it.Zero = append(it.Zero, messages.ByteRange{Bytes: head})
		}
		if head < g.Bytes {
			it.Zero = append(it.Zero, messages.ByteRange{Offset: head, Bytes: g.Bytes - head})
		}
		items[i] = it
	}
	return items
}

// checkArenaModel refuses spec when the manager's arena, still in the
// ledger (device.ArenaOwner), was built for another model_type or
// kv_block_size.
func (m *Manager) checkArenaModel(l device.Ledger, spec *arena.KVCacheSpec) error {
	p := m.arenaPlan.Load()
	if p == nil || l.Owners[device.ArenaOwner].CurrentBytes == 0 {
		return nil
	}
	switch {
	case p.ModelType != spec.ModelType:
		return &arena.KVCacheError{Field: "model_type", Mismatch: true,
			Reason: fmt.Sprintf("the spec is of model_type %q, the built arena of %q", spec.ModelType, p.ModelType)}
	case p.Options.KVBlockSize != spec.BlockTokens:
		return &arena.KVCacheError{Field: "kv_block_size", Asked: spec.BlockTokens, Available: p.Options.KVBlockSize, Mismatch: true,
			Reason: "the built arena's block_tables are for another kv_block_size"}
	}
	return nil
}
