package kvcache

import (
	"slices"
)

// refPool is the model-based tests' reference: the pool's rules written
// as plainly as possible, with slices and linear scans instead of a free
// list, a tree and hash maps. A cached prefix is the whole token prefix
// through the block (and the extra keys), compared as such, so it needs
// no hash and cannot collide.
//
// The rules it states:
//   - a block is free (no ref, no content), cached (no ref, content) or
//     used (ref > 0); unreferenced blocks wait in a queue, taken from the
//     front (dropping their content), given back at the back;
//   - a prefix P "exists" while a block (any group of its block size)
//     caches P or a longer prefix extending it, or a live sequence's full
//     blocks extend it;
//   - a prompt hits the longest h (a multiple of every block size, at most
//     len−1) such that every paged group has, cached, the blocks its kind
//     reads (full: all before h; sliding: the window's) and the prefix of
//     h exists; the block used is the one cached last;
//   - every full block of a sequence is cached under its prefix as soon as
//     it fills.
type refPool struct {
	groups  []*refGroup
	caching bool
	align   int
	seqs    map[SeqID]*refSeq
	stats   PrefixStats
	clock   int
}

type refGroup struct {
	cfg     GroupConfig
	ref     []int
	queue   []int32
	content []*refPrefix
	at      []int
	slots   []int32
}

// refPrefix is a sequence's tokens through one full block, and its extra
// keys.
type refPrefix struct {
	extra  string
	tokens []int32
}

func (a *refPrefix) equal(b *refPrefix) bool {
	return a.extra == b.extra && slices.Equal(a.tokens, b.tokens)
}

// extends reports whether a is b or continues it.
func (a *refPrefix) extends(b *refPrefix) bool {
	return a.extra == b.extra && len(a.tokens) >= len(b.tokens) && slices.Equal(a.tokens[:len(b.tokens)], b.tokens)
}

type refSeq struct {
	tokens []int32
	extra  string
	tables [][]int32
}

func newRefPool(groups []GroupConfig) *refPool {
	p := &refPool{caching: true, align: 1, seqs: map[SeqID]*refSeq{}}
	for _, cfg := range groups {
		g := &refGroup{cfg: cfg}
		if cfg.Kind == State {
			p.caching = false
			for s := cfg.Blocks - 1; s >= 0; s-- {
				g.slots = append(g.slots, int32(s))
			}
		} else {
			p.align = lcm(p.align, cfg.BlockSize)
			g.ref = make([]int, cfg.Blocks)
			g.content = make([]*refPrefix, cfg.Blocks)
			g.at = make([]int, cfg.Blocks)
			for b := 1; b < cfg.Blocks; b++ {
				g.queue = append(g.queue, int32(b))
			}
		}
		p.groups = append(p.groups, g)
	}
	return p
}

func (g *refGroup) paged() bool { return g.cfg.Kind != State }

func (g *refGroup) counts() GroupCounts {
	if !g.paged() {
		return GroupCounts{Total: g.cfg.Blocks, Free: len(g.slots), Used: g.cfg.Blocks - len(g.slots)}
	}
	c := GroupCounts{Total: g.cfg.Blocks - 1}
	for _, b := range g.queue {
		if g.content[b] != nil {
			c.Cached++
		} else {
			c.Free++
		}
	}
	for b := 1; b < g.cfg.Blocks; b++ {
		if g.ref[b] > 0 {
			c.Used++
		}
	}
	return c
}

func (g *refGroup) available() int {
	if !g.paged() {
		return len(g.slots)
	}
	return len(g.queue)
}

func (g *refGroup) exhausted(i int, op Op, seq SeqID, asked int) *ExhaustedError {
	c := g.counts()
	return &ExhaustedError{Op: op, Seq: seq, Group: i, Name: g.cfg.Name, Kind: g.cfg.Kind, Asked: asked, Free: c.Free, Evictable: c.Cached}
}

func (g *refGroup) take() int32 {
	b := g.queue[0]
	g.queue = g.queue[1:]
	g.content[b] = nil
	g.ref[b] = 1
	return b
}

func (g *refGroup) touch(b int32) {
	if g.ref[b] == 0 {
		g.queue = slices.DeleteFunc(g.queue, func(q int32) bool { return q == b })
	}
	g.ref[b]++
}

func (g *refGroup) release(b int32) {
	g.ref[b]--
	if g.ref[b] == 0 {
		g.queue = append(g.queue, b)
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// prefix is a sequence's prefix through block j of block size bs.
func prefix(tokens []int32, extra string, j, bs int) *refPrefix {
	return &refPrefix{extra: extra, tokens: tokens[:(j+1)*bs]}
}

// cachedBlock is the block of g caching exactly P that was cached last, or
// −1.
func (g *refGroup) cachedBlock(P *refPrefix) int32 {
	best, at := int32(-1), -1
	for b, c := range g.content {
		if c != nil && c.equal(P) && g.at[b] > at {
			best, at = int32(b), g.at[b]
		}
	}
	return best
}

// exists is the rule of which prefixes the tree still holds.
func (p *refPool) exists(bs int, P *refPrefix) bool {
	for _, g := range p.groups {
		if !g.paged() || g.cfg.BlockSize != bs {
			continue
		}
		for _, c := range g.content {
			if c != nil && c.extends(P) {
				return true
			}
		}
	}
	for _, s := range p.seqs {
		full := &refPrefix{extra: s.extra, tokens: s.tokens[:len(s.tokens)/bs*bs]}
		if full.extends(P) {
			return true
		}
	}
	return false
}

// hitRange is the block positions group g takes from the cache for a hit
// of h tokens.
func (g *refGroup) hitRange(h int) (lo, hi int) {
	hi = h / g.cfg.BlockSize
	if g.cfg.Kind == SlidingWindow {
		lo = min(max(0, h-g.cfg.Window+1)/g.cfg.BlockSize, hi)
	}
	return lo, hi
}

// hit is the longest hit, by trying every candidate from the longest.
func (p *refPool) hit(tokens []int32, extra string) int {
	if !p.caching || len(tokens) == 0 {
		return 0
	}
	for h := (len(tokens) - 1) / p.align * p.align; h > 0; h -= p.align {
		if p.serves(tokens, extra, h) {
			return h
		}
	}
	return 0
}

func (p *refPool) serves(tokens []int32, extra string, h int) bool {
	for _, g := range p.groups {
		if !g.paged() {
			continue
		}
		bs := g.cfg.BlockSize
		lo, hi := g.hitRange(h)
		if !p.exists(bs, prefix(tokens, extra, hi-1, bs)) {
			return false
		}
		for j := lo; j < hi; j++ {
			if g.cachedBlock(prefix(tokens, extra, j, bs)) < 0 {
				return false
			}
		}
	}
	return true
}

// cache caches a sequence's full blocks from block positions from to to in
// group g.
func (p *refPool) cache(g *refGroup, s *refSeq, table []int32, from, to int) {
	for j := from; j < to; j++ {
		b := table[j]
		g.content[b] = prefix(s.tokens, s.extra, j, g.cfg.BlockSize)
		g.at[b] = p.clock
		p.clock++
	}
}

func (p *refPool) apply(st Step) StepResult {
	var r StepResult
	if len(st.Admit) > 0 {
		r.CachedTokens = make([]int, len(st.Admit))
	}
	for i, id := range st.Free {
		r.note(OpFree, i, p.free(id))
	}
	for i, f := range st.Fork {
		r.note(OpFork, i, p.fork(f, &r))
	}
	for i, a := range st.Append {
		r.note(OpAppend, i, p.append(a, &r))
	}
	for i, a := range st.Admit {
		h, err := p.admit(a)
		r.CachedTokens[i] = h
		r.note(OpAdmit, i, err)
	}
	for _, g := range p.groups {
		r.Counts = append(r.Counts, g.counts())
	}
	return r
}

func (p *refPool) free(id SeqID) error {
	s := p.seqs[id]
	if s == nil {
		return &SequenceError{Op: OpFree, Seq: id, Err: ErrUnknownSequence}
	}
	for i, g := range p.groups {
		t := s.tables[i]
		if !g.paged() {
			g.slots = append(g.slots, t[0])
			continue
		}
		for j := len(t) - 1; j >= 0; j-- {
			if t[j] != NullBlock {
				g.release(t[j])
			}
		}
	}
	delete(p.seqs, id)
	return nil
}

func (p *refPool) fork(f Fork, r *StepResult) error {
	parent := p.seqs[f.Parent]
	if parent == nil {
		return &SequenceError{Op: OpFork, Seq: f.Parent, Err: ErrUnknownSequence}
	}
	if p.seqs[f.Child] != nil {
		return &SequenceError{Op: OpFork, Seq: f.Child, Err: ErrDuplicateSequence}
	}
	for i, g := range p.groups {
		if !g.paged() && len(g.slots) == 0 {
			return g.exhausted(i, OpFork, f.Child, 1)
		}
	}
	c := &refSeq{tokens: slices.Clone(parent.tokens), extra: parent.extra}
	for i, g := range p.groups {
		t := parent.tables[i]
		if !g.paged() {
			slot := g.slots[len(g.slots)-1]
			g.slots = g.slots[:len(g.slots)-1]
			c.tables = append(c.tables, []int32{slot})
			r.Copies = append(r.Copies, Copy{Group: i, Seq: f.Child, Src: t[0], Dst: slot})
			continue
		}
		for _, b := range t {
			if b != NullBlock {
				g.ref[b]++
			}
		}
		c.tables = append(c.tables, slices.Clone(t))
	}
	p.seqs[f.Child] = c
	return nil
}

func (p *refPool) append(a Append, r *StepResult) error {
	s := p.seqs[a.Seq]
	if s == nil {
		return &SequenceError{Op: OpAppend, Seq: a.Seq, Err: ErrUnknownSequence}
	}
	if len(a.Tokens) == 0 {
		return &SequenceError{Op: OpAppend, Seq: a.Seq, Err: ErrNoTokens}
	}
	n, k := len(s.tokens), len(a.Tokens)
	for i, g := range p.groups {
		if g.cfg.Kind != SlidingWindow {
			continue
		}
		t := s.tables[i]
		for j := min(max(0, n-g.cfg.Window+1)/g.cfg.BlockSize, len(t)) - 1; j >= 0 && t[j] != NullBlock; j-- {
			g.release(t[j])
			t[j] = NullBlock
		}
	}
	cow := func(g *refGroup, t []int32) bool {
		return n%g.cfg.BlockSize != 0 && g.ref[t[len(t)-1]] > 1
	}
	for i, g := range p.groups {
		if !g.paged() {
			continue
		}
		need := ceilDiv(n+k, g.cfg.BlockSize) - len(s.tables[i])
		if cow(g, s.tables[i]) {
			need++
		}
		if need > g.available() {
			return g.exhausted(i, OpAppend, a.Seq, need)
		}
	}
	for i, g := range p.groups {
		if !g.paged() {
			continue
		}
		t := s.tables[i]
		if cow(g, t) {
			src, dst := t[len(t)-1], g.take()
			t[len(t)-1] = dst
			g.release(src)
			r.Copies = append(r.Copies, Copy{Group: i, Seq: a.Seq, Src: src, Dst: dst})
		}
		for len(t) < ceilDiv(n+k, g.cfg.BlockSize) {
			t = append(t, g.take())
		}
		s.tables[i] = t
	}
	s.tokens = append(s.tokens, a.Tokens...)
	if p.caching {
		for i, g := range p.groups {
			if g.paged() {
				p.cache(g, s, s.tables[i], n/g.cfg.BlockSize, (n+k)/g.cfg.BlockSize)
			}
		}
	}
	return nil
}

func (p *refPool) admit(a Admit) (int, error) {
	if len(a.Tokens) == 0 {
		return 0, &SequenceError{Op: OpAdmit, Seq: a.Seq, Err: ErrNoTokens}
	}
	if p.seqs[a.Seq] != nil {
		return 0, &SequenceError{Op: OpAdmit, Seq: a.Seq, Err: ErrDuplicateSequence}
	}
	extra := string(a.Extra)
	h := p.hit(a.Tokens, extra)
	n := len(a.Tokens)
	if a.MaxNewTokens > 0 { // chunked prefill: the cached prefix and one chunk
		n = min(n, h+a.MaxNewTokens)
	}
	hits := make([][]int32, len(p.groups))
	for i, g := range p.groups {
		need := 1
		if g.paged() {
			lo, hi := g.hitRange(h)
			need = ceilDiv(n, g.cfg.BlockSize) - hi
			for j := lo; j < hi; j++ {
				b := g.cachedBlock(prefix(a.Tokens, extra, j, g.cfg.BlockSize))
				hits[i] = append(hits[i], b)
				if g.ref[b] == 0 {
					need++
				}
			}
		}
		if need > g.available() {
			return 0, g.exhausted(i, OpAdmit, a.Seq, need)
		}
	}
	s := &refSeq{tokens: slices.Clone(a.Tokens[:n]), extra: extra}
	for i, g := range p.groups {
		if !g.paged() {
			slot := g.slots[len(g.slots)-1]
			g.slots = g.slots[:len(g.slots)-1]
			s.tables = append(s.tables, []int32{slot})
			continue
		}
		lo, hi := g.hitRange(h)
		t := make([]int32, lo)
		for _, b := range hits[i] {
			g.touch(b)
			t = append(t, b)
		}
		for len(t) < ceilDiv(n, g.cfg.BlockSize) {
			t = append(t, g.take())
		}
		s.tables = append(s.tables, t)
		if p.caching {
			p.cache(g, s, t, hi, n/g.cfg.BlockSize)
		}
	}
	if p.caching {
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

func (p *refPool) reset() error {
	for i, g := range p.groups {
		if c := g.counts(); g.paged() && c.Used > 0 {
			return &CacheInUseError{Group: i, Name: g.cfg.Name, Used: c.Used}
		}
	}
	for _, g := range p.groups {
		if g.paged() {
			clear(g.content)
		}
	}
	return nil
}
