package kvcache

// skippedTokens is how many leading tokens the next token's attention no
// longer reads once computed tokens are in the cache: max(0, computed −
// window + 1), since token i attends to i−window+1 … i (vLLM
// SlidingWindowManager.get_num_skipped_tokens). Blocks wholly inside them,
// ⌊skipped / kv_block_size⌋, can go.
func skippedTokens(computed, window int) int { return max(0, computed-window+1) }

// skippedBlocks is ⌊skippedTokens / kv_block_size⌋ for a sliding group.
func (g *group) skippedBlocks(computed int) int {
	return skippedTokens(computed, g.cfg.Window) / g.cfg.BlockSize
}

// dropSkipped gives back the blocks of a sliding-window table that fall
// wholly before the window once computed tokens are in the cache, and puts
// the null block in their place, newest first, stopping at the first null
// (vLLM SingleTypeKVCacheManager.remove_skipped_blocks). The given-back
// blocks keep their cached prefix.
func (g *group) dropSkipped(table []int32, computed int) {
	for i := min(g.skippedBlocks(computed), len(table)) - 1; i >= 0 && table[i] != NullBlock; i-- {
		g.release(table[i])
		table[i] = NullBlock
	}
}
