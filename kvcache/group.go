package kvcache

// group is one KV cache group's blocks (paged kinds) or slots (State).
//
// A paged block is in one of three states, as in vLLM's BlockPool: used
// (ref > 0: in some sequence's table), cached (ref = 0, still attached to a
// prefix node, so a prompt can take it back) or free (ref = 0, holding
// nothing). Cached and free blocks wait in one free queue in the order they
// were given back, and a block taken from its front is evicted from the
// prefix cache if it was cached: vLLM's LRU, where a sequence gives its
// blocks back tail first so that a prefix outlives its continuations.
// Block 0, the null block, is in no state: never queued, never counted,
// never referenced.
type group struct {
	cfg GroupConfig
	// Paged kinds.
	ref      []int32 // references from sequences' tables
	queue    freeQueue
	cached   int          // queued blocks attached to a prefix node
	node     []int32      // the prefix node a block is attached to, or noNode
	nextSame []int32      // the next block of this group attached to the same node
	idx      *prefixIndex // nil without prefix caching
	slot     int          // this group's position in idx.groups
	// State.
	freeSlots []int32 // a stack: the next slot handed out is the last
}

func newGroup(cfg GroupConfig) group {
	g := group{cfg: cfg}
	n := cfg.Blocks
	if !cfg.Kind.paged() {
		g.freeSlots = make([]int32, n)
		for i := range n {
			g.freeSlots[i] = int32(n - 1 - i)
		}
		return g
	}
	g.ref = make([]int32, n)
	g.node = make([]int32, n)
	g.nextSame = make([]int32, n)
	for b := range n {
		g.node[b], g.nextSame[b] = noNode, noBlock
	}
	g.queue = newFreeQueue(n, int(NullBlock)+1)
	return g
}

// counts are the group's blocks (or slots) by state.
func (g *group) counts() GroupCounts {
	if !g.cfg.Kind.paged() {
		total := g.cfg.Blocks
		return GroupCounts{Total: total, Free: len(g.freeSlots), Used: total - len(g.freeSlots)}
	}
	total := g.cfg.Blocks - 1
	return GroupCounts{Total: total, Free: g.queue.len - g.cached, Cached: g.cached, Used: total - g.queue.len}
}

// available is how many blocks (slots) a request can take now: the free
// and the cached ones.
func (g *group) available() int {
	if !g.cfg.Kind.paged() {
		return len(g.freeSlots)
	}
	return g.queue.len
}

// exhausted is the error for a request that needs asked blocks now.
func (g *group) exhausted(id int, op Op, seq SeqID, asked int) *ExhaustedError {
	c := g.counts()
	return &ExhaustedError{Op: op, Seq: seq, Group: id, Name: g.cfg.Name, Kind: g.cfg.Kind, Asked: asked, Free: c.Free, Evictable: c.Cached}
}

// blocksFor is how many blocks n tokens fill: ⌈n / kv_block_size⌉.
func (g *group) blocksFor(n int) int { return (n + g.cfg.BlockSize - 1) / g.cfg.BlockSize }

// take hands out the block at the front of the free queue, evicting its
// cached prefix if it has one (vLLM BlockPool.get_new_blocks). The queue
// must not be empty.
func (g *group) take() int32 {
	b := g.queue.popFront()
	if g.node[b] != noNode {
		g.cached--
		g.idx.detach(g, b)
	}
	g.ref[b] = 1
	return b
}

// touch adds a reference to b, taking it off the free queue if it was
// waiting there (vLLM BlockPool.touch: a prefix-cache hit).
func (g *group) touch(b int32) {
	if g.ref[b] == 0 {
		g.queue.remove(b)
		if g.node[b] != noNode {
			g.cached--
		}
	}
	g.ref[b]++
}

// release drops a reference to b; unreferenced, b joins the back of the
// free queue, keeping its cached prefix (vLLM BlockPool.free_blocks).
func (g *group) release(b int32) {
	g.ref[b]--
	if g.ref[b] == 0 {
		g.queue.pushBack(b)
		if g.node[b] != noNode {
			g.cached++
		}
	}
}

// releaseTable gives back a table's blocks tail first, so the tail is
// evicted first (vLLM SingleTypeKVCacheManager.free), skipping null blocks.
func (g *group) releaseTable(table []int32) {
	for i := len(table) - 1; i >= 0; i-- {
		if table[i] != NullBlock {
			g.release(table[i])
		}
	}
}

// takeSlot hands out a state slot; one must be free.
func (g *group) takeSlot() int32 {
	s := g.freeSlots[len(g.freeSlots)-1]
	g.freeSlots = g.freeSlots[:len(g.freeSlots)-1]
	return s
}

// releaseSlot gives a state slot back.
func (g *group) releaseSlot(s int32) { g.freeSlots = append(g.freeSlots, s) }
