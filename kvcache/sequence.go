package kvcache

// SeqID names a sequence (a request, or one sample of a parallel-sampling
// request after Fork). The caller chooses it; the pool refuses an id it
// already holds.
type SeqID uint64

// sequence is what the pool keeps of one sequence.
type sequence struct {
	// tokens is how many tokens the sequence has: its prompt and every
	// token appended since.
	tokens int
	// pending is how many of the last tokens were appended without their
	// ids (Append.Pending): their slots are taken, their blocks not yet
	// in the prefix cache.
	pending int
	// tables holds, per group, the block ids of a paged group (position
	// i covers tokens i·kv_block_size …; NullBlock for a sliding-window
	// block given back) or the one slot of a state group.
	tables [][]int32
	// With prefix caching only: per index, the node of the last full
	// block (pinned, so the next full block has a parent in the tree);
	// the token ids from tailStart on, which the next full blocks need;
	// and the extra keys the first block is hashed with.
	last      []int32
	tail      []int32
	tailStart int
	extra     []byte
}

// newSequence returns an empty sequence record, reusing a freed one.
func (p *Pool) newSequence() *sequence {
	if n := len(p.spare); n > 0 {
		s := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return s
	}
	s := &sequence{tables: make([][]int32, len(p.groups)), last: make([]int32, len(p.indexes))}
	return s
}

// recycle keeps a freed sequence's slices for the next one.
func (p *Pool) recycle(s *sequence) {
	for i := range s.tables {
		s.tables[i] = s.tables[i][:0]
	}
	s.tail, s.extra = s.tail[:0], s.extra[:0]
	s.tokens, s.pending, s.tailStart = 0, 0, 0
	p.spare = append(p.spare, s)
}

// known is how many of the sequence's tokens have known ids: all but the
// pending ones. The tail and the prefix cache cover these only.
func (s *sequence) known() int { return s.tokens - s.pending }

// tailStart is where the tokens not yet in a full block of some index
// begin, for a sequence of n tokens: the least ⌊n / b⌋·b over the
// indexes' block sizes b.
func (p *Pool) tailStart(n int) int {
	start := n
	for _, x := range p.indexes {
		start = min(start, n/x.blockSize*x.blockSize)
	}
	return start
}

// trimTail drops the tokens every index has put in full blocks.
func (p *Pool) trimTail(s *sequence) {
	start := p.tailStart(s.known())
	s.tail = append(s.tail[:0], s.tail[start-s.tailStart:]...)
	s.tailStart = start
}

// register puts the sequence's full blocks from, to (block positions of
// index x) in the prefix cache: each block's node is found or made under
// the previous one, and the block of every group of x at that position is
// attached to it (vLLM BlockPool.cache_full_blocks). tokens holds the
// sequence's token ids from offset on. The sequence's pin moves to the
// last node.
func (p *Pool) register(s *sequence, x *prefixIndex, from, to int, tokens []int32, offset int) {
	if from >= to {
		return
	}
	b := x.blockSize
	parent := s.last[x.id]
	for j := from; j < to; j++ {
		var extra []byte
		if j == 0 {
			extra = s.extra
		}
		n := x.findOrCreate(parent, tokens[j*b-offset:j*b-offset+b], extra)
		for _, gi := range x.groups {
			g := &p.groups[gi]
			x.attach(n, g, s.tables[gi][j])
		}
		parent = n
	}
	old := s.last[x.id]
	x.pin(parent)
	x.unpin(old)
	s.last[x.id] = parent
}
