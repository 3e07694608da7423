package kvcache

// append grows a running sequence by a.Tokens (vLLM
// KVCacheManager.allocate_slots for a running request): sliding windows
// give back what fell out of them, a shared partial last block is copied
// before the write, new blocks are taken, and blocks that fill join the
// prefix cache. All or nothing past the window's give-back.
func (p *Pool) append(a Append, r *StepResult) error {
	s := p.seqs[a.Seq]
	switch {
	case s == nil:
		return &SequenceError{Op: OpAppend, Seq: a.Seq, Err: ErrUnknownSequence}
	case a.Pending < 0:
		return &SequenceError{Op: OpAppend, Seq: a.Seq, Err: ErrNegativePending}
	case len(a.Tokens) == 0 && a.Pending == 0:
		return &SequenceError{Op: OpAppend, Seq: a.Seq, Err: ErrNoTokens}
	}
	n, k := s.tokens, a.grows(s.pending)
	for i := range p.groups {
		if g := &p.groups[i]; g.cfg.Kind == SlidingWindow {
			g.dropSkipped(s.tables[i], n)
		}
	}
	for i := range p.groups {
		g := &p.groups[i]
		if !g.cfg.Kind.paged() {
			continue
		}
		need := g.blocksFor(n+k) - len(s.tables[i])
		if g.sharedPartial(s.tables[i], n) {
			need++
		}
		if need > g.available() {
			return g.exhausted(i, OpAppend, a.Seq, need)
		}
	}
	for i := range p.groups {
		g := &p.groups[i]
		if !g.cfg.Kind.paged() {
			continue
		}
		t := s.tables[i]
		if g.sharedPartial(t, n) {
			src, dst := t[len(t)-1], g.take()
			t[len(t)-1] = dst
			g.release(src)
			r.Copies = append(r.Copies, Copy{Group: i, Seq: a.Seq, Src: src, Dst: dst})
		}
		for range g.blocksFor(n+k) - len(t) {
			t = append(t, g.take())
		}
		s.tables[i] = t
	}
	known := s.known()
	s.tokens = n + k
	s.pending += a.Pending - min(len(a.Tokens), s.pending)
	if p.indexes == nil {
		return nil
	}
	// Only blocks of known ids join the prefix cache: a block its pending
	// tokens fill waits for the Append that names them.
	s.tail = append(s.tail, a.Tokens...)
	for _, x := range p.indexes {
		p.register(s, x, known/x.blockSize, s.known()/x.blockSize, s.tail, s.tailStart)
	}
	p.trimTail(s)
	return nil
}

// sharedPartial reports whether the last block of a table of n tokens is
// partly filled and shared with another sequence (after a Fork), so the
// next token must go to a copy: copy-on-write.
func (g *group) sharedPartial(table []int32, n int) bool {
	return n%g.cfg.BlockSize != 0 && g.ref[table[len(table)-1]] > 1
}
