package kvcache

// Pool is the block pool of a paged KV cache: every group's blocks, every
// sequence's block tables, and the prefix cache. It is a plain state
// machine, with no lock, atomic or goroutine: one goroutine at a time
// calls it (the KV actor, which serialises every change through its
// mailbox). Apply changes it; the other methods read it.
type Pool struct {
	groups []group
	// indexes are the prefix caches, one per kv_block_size of the paged
	// groups; nil without prefix caching.
	indexes []*prefixIndex
	// align is the least common multiple of the paged groups' block
	// sizes: a prefix hit is a multiple of it, so it ends on a block
	// boundary in every group.
	align int
	seqs  map[SeqID]*sequence
	spare []*sequence // freed sequences, their slices kept for reuse
	stats PrefixStats
	// Scratch of a lookup: the nodes walked per index and one group's
	// left runs of hits.
	paths [][]int32
	runs  []int32
}

// GroupCounts is one group's blocks (State: slots) by state. Free + Cached
// + Used = Total at every moment.
type GroupCounts struct {
	// Total is the usable blocks: GroupConfig.Blocks − 1 for a paged
	// group (the null block is not counted), Blocks for a state group.
	Total int
	// Free blocks hold nothing; Cached blocks are unused but hold a full
	// block's KV that a new prompt can take back (they are evicted, least
	// recently given back first, when a request needs the space); Used
	// blocks are in at least one sequence's table. State groups: Free and
	// Used slots, Cached 0.
	Free, Cached, Used int
}

// PrefixStats counts the prefix cache's work since New, over applied
// admissions only (an admission refused for exhaustion and sent again
// counts once), as vLLM's PrefixCacheStats (queries, hits in tokens).
// All stay 0 for a pool without prefix caching.
type PrefixStats struct {
	// Queries is admissions looked up; Hits those that found a cached
	// prefix.
	Queries, Hits int64
	// QueriedTokens is their prompt tokens; HitTokens the tokens found
	// cached, whose KV the forward does not compute (the tokens saved).
	QueriedTokens, HitTokens int64
}

// New makes a pool of cfg's groups, every block free. Prefix caching is on
// unless a group is a State group: a recurrent state summarises the whole
// sequence and one slot per sequence keeps no per-block snapshots, so a
// prompt cannot resume from a cached prefix (vLLM turns prefix caching off
// for Mamba layers unless mamba_cache_mode is "align"). Errors: a
// *ConfigError (ErrInvalidConfig) naming the first bad field.
func New(cfg Config) (*Pool, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool{groups: make([]group, len(cfg.Groups)), align: 1, seqs: make(map[SeqID]*sequence)}
	caching := true
	for i, gc := range cfg.Groups {
		p.groups[i] = newGroup(gc)
		if gc.Kind == State {
			caching = false
		} else {
			p.align = lcm(p.align, gc.BlockSize)
		}
	}
	if !caching {
		return p, nil
	}
	hash := cfg.Hash
	if hash == nil {
		hash = seededHash()
	}
	for i := range p.groups {
		g := &p.groups[i]
		if !g.cfg.Kind.paged() {
			continue
		}
		var x *prefixIndex
		for _, have := range p.indexes {
			if have.blockSize == g.cfg.BlockSize {
				x = have
			}
		}
		if x == nil {
			x = newPrefixIndex(len(p.indexes), g.cfg.BlockSize, hash)
			p.indexes = append(p.indexes, x)
		}
		g.idx, g.slot = x, len(x.groups)
		x.groups = append(x.groups, i)
	}
	p.paths = make([][]int32, len(p.indexes))
	return p, nil
}

// lcm is the least common multiple of two positive ints (Config.validate
// bounds a pool's by MaxAlignment).
func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// Counts returns each group's counts, in Config.Groups order.
func (p *Pool) Counts() []GroupCounts {
	c := make([]GroupCounts, len(p.groups))
	for i := range p.groups {
		c[i] = p.groups[i].counts()
	}
	return c
}

// PrefixStats returns the prefix cache's counters.
func (p *Pool) PrefixStats() PrefixStats { return p.stats }

// PrefixCaching reports whether the pool caches prefixes (no State group).
func (p *Pool) PrefixCaching() bool { return p.indexes != nil }

// Len is the number of sequences the pool holds.
func (p *Pool) Len() int { return len(p.seqs) }

// ResetPrefixCache forgets every cached prefix: the cached blocks become
// free and no prompt hits until new blocks fill. vLLM uses it after a
// weights update (BlockPool.reset_prefix_cache). It needs every block
// unused. Errors: a *CacheInUseError (ErrCacheInUse) naming the first
// group with blocks in use; nothing changes then.
func (p *Pool) ResetPrefixCache() error {
	for i := range p.groups {
		g := &p.groups[i]
		if c := g.counts(); g.cfg.Kind.paged() && c.Used > 0 {
			return &CacheInUseError{Group: i, Name: g.cfg.Name, Used: c.Used}
		}
	}
	for i := range p.groups {
		g := &p.groups[i]
		if g.idx == nil {
			continue
		}
		for b := range g.node {
			g.node[b], g.nextSame[b] = noNode, noBlock
		}
		g.cached = 0
	}
	for _, x := range p.indexes {
		x.reset()
	}
	return nil
}
