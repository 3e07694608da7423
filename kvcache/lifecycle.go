package kvcache

// free gives a sequence's blocks back, tail first, and its state slots
// (vLLM KVCacheManager.free); blocks holding full cached prefixes stay
// cached until evicted.
func (p *Pool) free(id SeqID) error {
	s := p.seqs[id]
	if s == nil {
		return &SequenceError{Op: OpFree, Seq: id, Err: ErrUnknownSequence}
	}
	for i := range p.groups {
		g := &p.groups[i]
		if g.cfg.Kind.paged() {
			g.releaseTable(s.tables[i])
		} else {
			g.releaseSlot(s.tables[i][0])
		}
	}
	for _, x := range p.indexes {
		x.unpin(s.last[x.id])
	}
	delete(p.seqs, id)
	p.recycle(s)
	return nil
}

// fork makes f.Child share f.Parent's blocks, each referenced once more;
// each state group gives the child a slot to copy the parent's state into.
// vLLM v1 forks nothing (parallel sampling there runs n requests that
// share a prefix through the prefix cache); this is v0's
// BlockSpaceManager.fork, with its copy-on-write, done on a block table.
func (p *Pool) fork(f Fork, r *StepResult) error {
	parent := p.seqs[f.Parent]
	switch {
	case parent == nil:
		return &SequenceError{Op: OpFork, Seq: f.Parent, Err: ErrUnknownSequence}
	case p.seqs[f.Child] != nil:
		return &SequenceError{Op: OpFork, Seq: f.Child, Err: ErrDuplicateSequence}
	case parent.pending > 0:
		// Its copies would write different tokens into the slots they
		// share.
		return &SequenceError{Op: OpFork, Seq: f.Parent, Err: ErrPendingTokens}
	}
	for i := range p.groups {
		if g := &p.groups[i]; !g.cfg.Kind.paged() && g.available() < 1 {
			return g.exhausted(i, OpFork, f.Child, 1)
		}
	}
	c := p.newSequence()
	for i := range p.groups {
		g := &p.groups[i]
		if !g.cfg.Kind.paged() {
			src := parent.tables[i][0]
			dst := g.takeSlot()
			c.tables[i] = append(c.tables[i], dst)
			r.Copies = append(r.Copies, Copy{Group: i, Seq: f.Child, Src: src, Dst: dst})
			continue
		}
		for _, b := range parent.tables[i] {
			if b != NullBlock {
				g.ref[b]++
			}
		}
		c.tables[i] = append(c.tables[i], parent.tables[i]...)
	}
	c.tokens = parent.tokens
	c.tail = append(c.tail, parent.tail...)
	c.tailStart = parent.tailStart
	c.extra = append(c.extra, parent.extra...)
	for _, x := range p.indexes {
		c.last[x.id] = parent.last[x.id]
		x.pin(c.last[x.id])
	}
	p.seqs[f.Child] = c
	return nil
}
