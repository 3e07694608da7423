package kvcache

import "fmt"

// Kind is what a KV cache group holds for a sequence, after vLLM's
// single_type_kv_cache_manager.py: one manager class per attention kind.
type Kind uint8

const (
	// FullAttention keeps every token: a sequence of n tokens holds
	// ⌈n / kv_block_size⌉ blocks (vLLM FullAttentionManager).
	FullAttention Kind = iota + 1
	// SlidingWindow keeps the last Window tokens: blocks wholly before the
	// window are given back (vLLM SlidingWindowManager; see skippedTokens).
	SlidingWindow
	// State is fixed per-sequence state (GDN or Mamba-2 conv and SSM
	// state): one slot per sequence, whatever its length (vLLM MambaManager
	// without prefix caching, mamba_cache_mode "none").
	State
)

// String is the kind's name as the config and errors spell it.
func (k Kind) String() string {
	switch k {
	case FullAttention:
		return "full_attention"
	case SlidingWindow:
		return "sliding_window"
	case State:
		return "state"
	default:
		return fmt.Sprintf("Kind(%d)", uint8(k))
	}
}

// paged reports whether k keeps KV in blocks of kv_block_size tokens.
func (k Kind) paged() bool { return k == FullAttention || k == SlidingWindow }

// MaxBlocks is the most blocks (or state slots) one group may have: block
// ids are int32, and the pool keeps about 20 bytes of host metadata per
// block.
const MaxBlocks = 1 << 26

// MaxBlockSize is the largest kv_block_size, in tokens.
const MaxBlockSize = 1 << 16

// MaxAlignment bounds the least common multiple of a pool's block sizes,
// in tokens: a prefix hit must end on a block boundary in every group, so
// hits come in multiples of it.
const MaxAlignment = 1 << 20

// GroupConfig is one KV cache group: the layers that share a kind (and a
// window) share one block table per sequence, as in vLLM's KVCacheGroupSpec.
// The device memory behind the blocks is not the pool's: a block or slot
// here is an index into the group's allocation.
type GroupConfig struct {
	// Name labels the group in errors and counts ("full_attention",
	// "sliding_window", "gdn_state").
	Name string
	// Kind is the group's kind.
	Kind Kind
	// Blocks is the group's size. Paged kinds: blocks of BlockSize tokens,
	// block 0 included, which is the null block (NullBlock: never handed
	// out, it stands for a skipped sliding-window block and pads tables, as
	// vLLM's BlockPool.null_block), so Blocks − 1 are usable and Blocks must
	// be at least 2. State: slots, all usable, at least 1. At most
	// MaxBlocks.
	Blocks int
	// BlockSize is kv_block_size, tokens per block (paged kinds; 1 to
	// MaxBlockSize). Zero for State.
	BlockSize int
	// Window is sliding_window in tokens (SlidingWindow only, at least 1;
	// zero otherwise): token i attends to tokens i−Window+1 … i.
	Window int
}

// Config is a pool's groups and, for tests, its block hash.
type Config struct {
	// Groups are the pool's KV cache groups, at least one; a sequence has a
	// block table in each. A group's index in Groups is its id in Copy,
	// ExhaustedError and the table functions.
	Groups []GroupConfig
	// Hash keys full blocks in the prefix cache; nil is maphash with a
	// seed drawn for the pool (seededHash). Tests inject a weak one to
	// force collisions: a collision never makes two different blocks
	// share, because every hit is verified (see the package doc).
	Hash HashFunc
}

// validate returns a *ConfigError for the first field out of range.
func (c *Config) validate() error {
	if len(c.Groups) == 0 {
		return &ConfigError{Group: -1, Field: "Groups", Reason: "a pool needs at least one group"}
	}
	names := make(map[string]int, len(c.Groups))
	align := 1
	for i, g := range c.Groups {
		bad := func(field string, value int, reason string) error {
			return &ConfigError{Group: i, Name: g.Name, Field: field, Value: value, Reason: reason}
		}
		if g.Name == "" {
			return bad("Name", 0, "must not be empty")
		}
		if j, dup := names[g.Name]; dup {
			return bad("Name", 0, fmt.Sprintf("repeats group %d's name", j))
		}
		names[g.Name] = i
		switch g.Kind {
		case FullAttention, SlidingWindow:
			if g.Blocks < 2 || g.Blocks > MaxBlocks {
				return bad("Blocks", g.Blocks, fmt.Sprintf("must be 2 to %d (block 0 is the null block)", MaxBlocks))
			}
			if g.BlockSize < 1 || g.BlockSize > MaxBlockSize {
				return bad("BlockSize", g.BlockSize, fmt.Sprintf("kv_block_size must be 1 to %d tokens", MaxBlockSize))
			}
			if align = lcm(align, g.BlockSize); align > MaxAlignment {
				return bad("BlockSize", g.BlockSize, fmt.Sprintf("the groups' block sizes have a least common multiple over %d tokens: use sizes that divide one another", MaxAlignment))
			}
		case State:
			if g.Blocks < 1 || g.Blocks > MaxBlocks {
				return bad("Blocks", g.Blocks, fmt.Sprintf("a state group needs 1 to %d slots", MaxBlocks))
			}
			if g.BlockSize != 0 {
				return bad("BlockSize", g.BlockSize, "a state group has no blocks: leave BlockSize 0")
			}
		default:
			return bad("Kind", int(g.Kind), "must be FullAttention, SlidingWindow or State")
		}
		switch {
		case g.Kind == SlidingWindow && g.Window < 1:
			return bad("Window", g.Window, "sliding_window must be at least 1 token")
		case g.Kind != SlidingWindow && g.Window != 0:
			return bad("Window", g.Window, "only a SlidingWindow group has a window: leave it 0")
		}
	}
	return nil
}
