package kvcache

// admit starts a sequence with its prompt (vLLM KVCacheManager.
// get_computed_blocks then allocate_slots for a new request, with the
// whole prompt scheduled, or with MaxNewTokens a chunk of it): it returns
// the tokens found cached. All or nothing: every group is checked before
// any changes.
func (p *Pool) admit(a Admit) (int, error) {
	switch {
	case len(a.Tokens) == 0:
		return 0, &SequenceError{Op: OpAdmit, Seq: a.Seq, Err: ErrNoTokens}
	case p.seqs[a.Seq] != nil:
		return 0, &SequenceError{Op: OpAdmit, Seq: a.Seq, Err: ErrDuplicateSequence}
	}
	h := 0
	if p.indexes != nil {
		h = p.match(a.Tokens, a.Extra)
	}
	n := a.AdmittedTokens(h) // the tokens the sequence holds: the prompt, or its first chunk
	// What each group needs off its free queue: new blocks for the
	// uncached tokens and the hits now waiting unused in the queue.
	for i := range p.groups {
		g := &p.groups[i]
		need := 1
		if g.cfg.Kind.paged() {
			lo, hi := g.hitRange(h)
			need = g.blocksFor(n) - hi
			if h > 0 {
				path := p.paths[g.idx.id]
				for j := lo; j < hi; j++ {
					if g.ref[g.idx.head(path[j], g.slot)] == 0 {
						need++
					}
				}
			}
		}
		if need > g.available() {
			return 0, g.exhausted(i, OpAdmit, a.Seq, need)
		}
	}
	s := p.newSequence()
	s.tokens = n
	s.extra = append(s.extra, a.Extra...)
	// Pin the hit's last node first: taking new blocks may evict cached
	// ones, and the nodes past the hit with them.
	for _, x := range p.indexes {
		s.last[x.id] = noNode
		if hi := h / x.blockSize; hi > 0 {
			s.last[x.id] = p.paths[x.id][hi-1]
			x.pin(s.last[x.id])
		}
	}
	for i := range p.groups {
		g := &p.groups[i]
		t := s.tables[i]
		if !g.cfg.Kind.paged() {
			s.tables[i] = append(t, g.takeSlot())
			continue
		}
		lo, hi := g.hitRange(h)
		for range lo {
			t = append(t, NullBlock)
		}
		for j := lo; j < hi; j++ {
			b := g.idx.head(p.paths[g.idx.id][j], g.slot)
			g.touch(b)
			t = append(t, b)
		}
		for range g.blocksFor(n) - hi {
			t = append(t, g.take())
		}
		s.tables[i] = t
	}
	for _, x := range p.indexes {
		p.register(s, x, h/x.blockSize, n/x.blockSize, a.Tokens, 0)
	}
	if p.indexes != nil {
		s.tailStart = p.tailStart(n)
		s.tail = append(s.tail, a.Tokens[s.tailStart:n]...)
		p.stats.Queries++
		p.stats.QueriedTokens += int64(len(a.Tokens))
		if h > 0 {
			p.stats.Hits++
			p.stats.HitTokens += int64(h)
		}
	}
	p.seqs[a.Seq] = s
	return h, nil
}
