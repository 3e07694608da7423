package kvcache

// CachedPrefix is how many of a prompt's tokens an admission would find in
// the prefix cache now (Admit's StepResult.CachedTokens, if nothing else
// changed first): a multiple of every paged group's kv_block_size, at
// most len(tokens) − 1. It changes nothing and counts no query; 0 without
// prefix caching. Cost: one hash and one map lookup per cached block.
func (p *Pool) CachedPrefix(tokens []int32, extra []byte) int {
	if p.indexes == nil || len(tokens) == 0 {
		return 0
	}
	return p.match(tokens, extra)
}

// match finds a prompt's longest prefix hit, as vLLM's
// KVCacheManager.get_computed_blocks with its coordinator's
// find_longest_cache_hit: at most len(tokens) − 1 tokens (the last token
// is always computed, for its logits), a multiple of p.align, and served by
// every paged group. The nodes walked are left in p.paths.
//
// Each group kind says which hit lengths it can serve (bestHit); the
// longest length all can serve is found by lowering the candidate to each
// group's best in turn until none lowers it (vLLM's
// HybridKVCacheCoordinator iterates the same way).
func (p *Pool) match(tokens []int32, extra []byte) int {
	limit := (len(tokens) - 1) / p.align * p.align
	for _, x := range p.indexes {
		path := x.walk(tokens, extra, limit/x.blockSize, p.paths[x.id][:0])
		p.paths[x.id] = path
		limit = min(limit, len(path)*x.blockSize/p.align*p.align)
	}
	h := limit
	for lowered := h > 0; lowered; {
		lowered = false
		for i := range p.groups {
			g := &p.groups[i]
			if g.idx == nil {
				continue
			}
			if best := p.bestHit(g, h); best < h {
				h, lowered = best, true
			}
		}
	}
	return h
}

// bestHit is the longest hit of at most h tokens (a multiple of p.align)
// group g can serve from the walked path.
//
// Full attention needs every block of the prefix cached in g (vLLM
// FullAttentionManager.find_longest_cache_hit). A sliding window needs only
// the blocks the next token still reads, ⌊skippedTokens(h) / b⌋ … h/b − 1;
// the blocks before are null (vLLM SlidingWindowManager.find_longest_cache_hit).
// Either way the path itself (every node up to h) must exist, which is what
// makes a hit exact: a window's blocks are verified through their parents.
func (p *Pool) bestHit(g *group, h int) int {
	b, path := g.cfg.BlockSize, p.paths[g.idx.id]
	if g.cfg.Kind == FullAttention {
		j := 0
		for j < h/b && g.idx.head(path[j], g.slot) != noBlock {
			j++
		}
		return j * b / p.align * p.align
	}
	// runs[j] is how many blocks up to j, inclusive, are cached in g.
	p.runs = p.runs[:0]
	run := int32(0)
	for j := range h / b {
		if g.idx.head(path[j], g.slot) != noBlock {
			run++
		} else {
			run = 0
		}
		p.runs = append(p.runs, run)
	}
	for ; h > 0; h -= p.align {
		end, lo := h/b, g.skippedBlocks(h)
		if lo == end || int(p.runs[end-1]) >= end-lo {
			return h
		}
	}
	return 0
}

// hitRange is the block positions of a paged group's hit of h tokens:
// blocks lo … hi−1 are taken from the cache, blocks before lo are null
// (a sliding window's skipped blocks).
func (g *group) hitRange(h int) (lo, hi int) {
	hi = h / g.cfg.BlockSize
	if g.cfg.Kind == SlidingWindow {
		lo = min(g.skippedBlocks(h), hi)
	}
	return lo, hi
}
