package gpuarena

import (
	"context"
	"github.com/gpuarena/gpuarena/actors"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/kvcache"
)

// ErrNoKVCache is returned by the KV methods before BuildKVCache, and after
// Release dropped the cache.
var ErrNoKVCache = actors.ErrNoKVCache

// poolConfig is the block pool over spec's groups, in the same order:
// full-attention, MLA and compressed groups are paged groups of every
// token (kvcache.FullAttention), the sliding-window group keeps its window
// (kvcache.SlidingWindow), and state groups hold a slot per sequence
// (kvcache.State). A paged group's block 0 is the pool's null block
// (kvcache.NullBlock), as vLLM's is: it holds nothing of any sequence.
func poolConfig(spec *arena.KVCacheSpec) kvcache.Config {
	cfg := kvcache.Config{Groups: make([]kvcache.GroupConfig, len(spec.Groups))}
	for i, g := range spec.Groups {
		gc := kvcache.GroupConfig{Name: g.Name, Kind: kvcache.FullAttention, Blocks: int(g.Blocks), BlockSize: int(g.BlockTokens)}
		switch {
		case g.Name == arena.KVGroupSlidingWindow:
			gc.Kind, gc.Window = kvcache.SlidingWindow, int(g.Window)
		case g.BlockTokens == 0:
			gc.Kind, gc.BlockSize = kvcache.State, 0
		}
		cfg.Groups[i] = gc
	}
	return cfg
}

// KVStep applies one scheduler step to the KV cache's block pool, through
// the KV supervisor's mailbox (one round trip): in order, it frees
// finished or preempted sequences, forks, appends tokens to running
// sequences and admits new ones with their prompts (or, under chunked
// prefill, their first chunks: kvcache.Admit.MaxNewTokens), reusing
// cached prefixes (kvcache.Step says exactly how). Each request is all or
// nothing; one the pool refuses is in the result's Errors — an
// *kvcache.ExhaustedError (kvcache.ErrExhausted) with the group, the
// blocks asked, free and evictable when the pool is short, so the
// scheduler can preempt and send it again — and changes nothing. The
// result also lists the block copies a kernel must make before the
// forward (copy-on-write after a fork) and each group's counts. With
// s.Tables, the supervisor also writes the batch's block tables as the
// step leaves them into s.Tables.Dst before it replies (what
// KVBlockTables writes, in the same round trip; the result's TablesErr
// says why not), so a scheduler step and its forward's block_tables cost
// one round trip; Dst must not be touched until KVStep returns.
//
// ctx is checked when the request reaches the supervisor; a step it
// applied is always reported. Errors (nothing applied): ErrNoKVCache, the
// context's, actors.ErrSupervisorPanic (the pool is not used again until
// Release), ErrClosed.
func (m *Manager) KVStep(ctx context.Context, s kvcache.Step) (kvcache.StepResult, error) {
	return m.kv.Step(ctx, s)
}

// KVBlockTables writes group's block tables of batch (one row per
// sequence, in order) into dst as little-endian int32 in shape's [Rows,
// Width] layout — the block_tables field of arena.DecodeMetaLayout, which
// a forward step copies into the arena's scratch buffer at its offset —
// padded with kvcache.NullBlock (paged groups) or kvcache.StatePad (state
// groups). dst must hold Rows·Width·4 bytes. Errors: a *kvcache.TableError
// (kvcache.ErrTableLayout, with kvcache.ErrUnknownSequence for a sequence
// the pool does not hold), and KVStep's.
func (m *Manager) KVBlockTables(ctx context.Context, group int, shape kvcache.TableShape, batch []kvcache.SeqID, dst []byte) error {
	return m.kv.EncodeBlockTables(ctx, group, shape, batch, dst)
}

// KVBlockTable returns one sequence's block tables, by group in the cache's
// group order. Errors: a *kvcache.SequenceError (kvcache.ErrUnknownSequence),
// and KVStep's.
func (m *Manager) KVBlockTable(ctx context.Context, seq kvcache.SeqID) ([][]int32, error) {
	return m.kv.BlockTable(ctx, seq)
}

// KVStats returns the block pool's counts: per group free, cached and used
// blocks (Total = Free + Cached + Used), the prefix cache's counters and the
// sequences held. Errors: KVStep's.
func (m *Manager) KVStats(ctx context.Context) (device.KVStats, error) { return m.kv.Stats(ctx) }

// KVCheck checks the block pool's invariants (kvcache.Pool.Check: no block
// held twice unless shared, reference counts equal references, free +
// cached + used = total, every cached block indexed once). Errors: the
// first broken invariant, and KVStep's.
func (m *Manager) KVCheck(ctx context.Context) error { return m.kv.Check(ctx) }

// ResetPrefixCache forgets every cached prefix, as vLLM does after a
// weights update: only when no sequence holds a block. Errors: a
// *kvcache.CacheInUseError (kvcache.ErrCacheInUse), and KVStep's.
func (m *Manager) ResetPrefixCache(ctx context.Context) error { return m.kv.ResetPrefixCache(ctx) }
