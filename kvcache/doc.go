// Package kvcache is the block pool of a paged KV cache: which blocks of
// each KV cache group every sequence holds, which full blocks are kept for
// prefix caching, and what a scheduler step changes. It is a plain state
// machine, after vLLM v1's KV cache manager (vllm/v1/core/block_pool.py,
// kv_cache_utils.py, single_type_kv_cache_manager.py, kv_cache_manager.py,
// kv_cache_coordinator.py): no goroutine, no lock, no atomic. One owner
// (the KV actor, whose mailbox serialises every change, as raft's node.go
// owns a RawNode) calls it; it allocates no device memory: a block is an
// index into a group's allocation.
//
// # Groups
//
// A pool has KV cache groups (GroupConfig), each with its own blocks: full
// attention (a sequence of n tokens holds ⌈n / kv_block_size⌉ blocks),
// sliding window (blocks wholly before the window are given back: see
// skippedTokens, vLLM's SlidingWindowManager.get_num_skipped_tokens and
// remove_skipped_blocks) and state (one slot per sequence: GDN or Mamba-2
// state). Block 0 of every paged group is the null block, vLLM's design:
// never handed out, it stands in a table for a sliding-window block given
// back and pads tables (NullBlock).
//
// # A step
//
// Apply takes one scheduler step (Step: frees, forks, appends,
// admissions, in that order) and returns one StepResult: per admission the
// prompt tokens found cached, the refused requests with typed errors, the
// block copies a kernel must do, and the counts per group. Each request is
// all or nothing across the groups; a refused one stops nothing else. An
// admission or append that does not fit is an *ExhaustedError (Asked,
// Free, Evictable) and allocates nothing, so the scheduler can preempt a
// sequence and send it again.
//
// Under chunked prefill an admission takes its cached prefix and only
// the first chunk of the rest (Admit.MaxNewTokens; the prefix is still
// looked up over the whole prompt) and later chunks come as appends, as
// vLLM's scheduler allocates slots only for the tokens a step computes.
//
// A scheduler that plans step N+1 while step N runs appends the token step
// N samples before knowing it (Append.Pending): its slot is taken by count,
// and the block it fills joins the prefix cache only when a later append
// names its id (vLLM's async scheduling). A sequence with such a token is
// not forked (ErrPendingTokens).
//
// Fork shares a sequence's blocks with a child by reference counts (vLLM
// v0's BlockSpaceManager.fork): full blocks stay shared, a shared partial
// last block is copied by the first sequence that writes to it (copy-on-
// write, a Copy in the result), a state slot is copied at the fork.
//
// # Prefix caching
//
// vLLM's automatic prefix caching: a full block is keyed by a chained hash
// of its parent block's key, its token ids and, for a sequence's first
// block, the sequence's extra keys (a LoRA adapter, a cache salt,
// multimodal content hashes; vLLM kv_cache_utils.hash_block_tokens). A
// block is cached as soon as it fills; a new prompt takes the longest
// cached prefix (at most its length − 1: the last token is computed for
// its logits), sharing the blocks by reference count and taking unused
// ones back off the free queue; a freed block keeps its content until its
// space is needed, and the free queue evicts in the order blocks were given
// back, a sequence's tail blocks first (vLLM FreeKVCacheBlockQueue).
// PrefixStats counts queries, hits and tokens saved; ResetPrefixCache
// forgets everything when no block is in use.
//
// Unlike vLLM, a hit is exact whatever the hash. The cache is a tree
// (prefixIndex): a key only finds candidate blocks, and a candidate is
// taken only if its stored tokens, extra keys and parent (itself verified
// the same way, down to the first block) are the prompt's, so two
// different token blocks never share a cached block even under a hash
// that always collides (tests inject one). The hash is therefore chosen
// for speed and for resistance to clients that craft colliding prompts:
// hash/maphash with a seed drawn per pool (seededHash says why not
// sha256). The tree keeps a prefix's tokens while a cached block, a
// longer prefix or a live sequence refers to it; a prompt's lookup walks
// it from the first block and stops where it ends.
//
// A sliding-window group serves a hit with only the blocks the next token
// reads, the rest null (vLLM SlidingWindowManager.find_longest_cache_hit);
// a hit spans every group, so its length is the longest each group can
// serve (vLLM's HybridKVCacheCoordinator). A pool with a state group caches
// no prefixes: one slot per sequence keeps no state at block boundaries to
// resume from (vLLM also turns prefix caching off for Mamba layers unless
// mamba_cache_mode is "align").
//
// # Block tables
//
// BlockTable returns a sequence's tables; WriteBlockTables and
// EncodeBlockTables write a batch's tables of one group in the
// [max(32, max_batch_size), ⌈max_seq_len / kv_block_size⌉] int32 layout
// that arena.DecodeMetaLayout reserves for block_tables in the scratch
// buffer (TableShape), padded with NullBlock (paged) or StatePad (state).
// A Step may ask for them too (Step.Tables): written after the step, so
// that the pool's owner answers a scheduler step and its forward's
// block_tables in one message.
//
// # Where it differs from vLLM
//
//   - Each group has blocks of its own, since the cache is allocated per
//     group; vLLM's hybrid allocator shares one pool of equal-size pages
//     among groups.
//   - Hits are verified against the blocks' contents (above); vLLM trusts
//     sha256.
//   - Extra keys belong to the sequence and enter its first block's key, so
//     prompts with different multimodal items share no block, even before
//     the first item; vLLM keys each block with the items it overlaps.
//   - Fork exists (vLLM v1 has none), and only applied admissions count in
//     PrefixStats.
//
// # Invariants
//
// Check verifies them: reference counts equal the references from
// sequences' tables (no block is held twice unless shared); the free queue
// holds each unused block once; free + cached + used = total per group;
// every cached block is found again by its key and holds its sequence's
// prefix; every state slot is free or held by one sequence.
package kvcache
