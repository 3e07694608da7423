package serving

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gpuarena/gpuarena/kvcache"
)

// Tables is where Schedule has the KV block pool write the batch's block
// tables with the step (kvcache.Step.Tables), so that the forward's
// block_tables come back with the step in one round trip: Group's tables
// of Batch.Seqs, one row each in order, into Dst in Shape's [Rows, Width]
// little-endian int32 layout — the block_tables field of
// arena.DecodeMetaLayout. Dst must hold Shape.Rows·Shape.Width·4 bytes.
type Tables struct {
	Group int
	Shape kvcache.TableShape
	Dst   []byte
}

// planned is one sequence of the step being built: q computes tokens
// [from, from+n) of q.tokens. admit is its index in the step's Admit for
// an admission (from and n are then known only from the pool's reply:
// its cached prefix and its chunk), −1 for a running sequence's append.
type planned struct {
	q       *liveSeq
	admit   int
	from, n int
	pending bool // a decode of the token the step in flight samples
}

// stepScratch is what Schedule and Commit reuse step after step, so that
// a step of hundreds of sequences allocates next to nothing.
type stepScratch struct {
	step    kvcache.Step
	table   kvcache.TableRequest
	ids     []kvcache.SeqID
	plan    []planned
	refused map[kvcache.SeqID]bool
	admits  []bool        // refused admissions, by index
	seqs    [2][]BatchSeq // by step parity: a batch stays valid while the next is planned
	freed   []Key
	dropped []Key // Unservable
	outputs []Output
}

// Schedule runs the scheduling half of one step (see Live) and returns the
// batch the forward computes. With tables not nil, the batch's block
// tables are in tables.Dst when it returns, written by the pool with the
// step (a preemption round writes them again), so a step is one round
// trip to the KV block pool, one more per preemption round. The batch's
// Seqs stay valid until the Schedule after next, so a caller may schedule
// step N+1 while step N runs (see Live); its Freed, Unservable and Counts
// until the next Schedule. Errors: kv's, a refusal other than exhaustion,
// or tables the pool could not write (a Tables shape smaller than the
// batch, or a scheduler bug), wrapped with the step; a call with two steps
// scheduled and not committed; on an error the scheduler's state is
// undefined.
func (s *Live) Schedule(ctx context.Context, kv KV, tables *Tables) (Batch, error) {
	if s.inflight >= 2 {
		return Batch{}, fmt.Errorf("serving: step %d: two steps are scheduled and not committed: commit one first", s.stats.Steps)
	}
	sc := &s.scratch
	parity := s.stats.Steps % 2
	b := Batch{Seqs: sc.seqs[parity][:0], Freed: sc.freed[:0], Unservable: sc.dropped[:0]}
	st := kvcache.Step{Free: sc.step.Free[:0], Append: sc.step.Append[:0], Admit: sc.step.Admit[:0]}
	defer func() {
		sc.step = st
		sc.seqs[parity], sc.freed, sc.dropped = b.Seqs, b.Freed, b.Unservable
	}()
	for _, q := range s.finishing {
		st.Free = append(st.Free, q.id)
		b.Freed = append(b.Freed, q.key)
	}
	clear(s.finishing)
	s.finishing = s.finishing[:0]
	plan := s.plan(&st)
	if tables != nil {
		st.Tables = s.tableRequest(tables, plan, true)
	}
	res, err := s.stats.apply(ctx, kv, st)
	if err != nil {
		return b, err
	}
	clear(sc.refused)
	sc.admits = slices.Grow(sc.admits[:0], len(st.Admit))[:len(st.Admit)]
	clear(sc.admits)
	for _, e := range res.Errors {
		if !errors.Is(e.Err, kvcache.ErrExhausted) {
			return b, fmt.Errorf("step %d: %s %d refused: %w", s.stats.Steps, e.Op, e.Index, e.Err)
		}
		if e.Op == kvcache.OpAppend {
			sc.refused[st.Append[e.Index].Seq] = true
		} else {
			sc.admits[e.Index] = true
		}
	}
	var back []*liveSeq
	for i := range plan {
		p := &plan[i]
		if p.admit < 0 {
			continue
		}
		q := p.q
		if sc.admits[p.admit] {
			back = append(back, q)
			continue
		}
		h := res.CachedTokens[p.admit]
		p.from, p.n = h, st.Admit[p.admit].AdmittedTokens(h)-h
		s.stats.Admitted++
		s.stats.PrefillTokens += len(q.tokens)
		s.stats.CachedTokens += h
		q.running = true
		s.running = append(s.running, q)
	}
	if len(back) > 0 && len(s.running) == 0 && len(st.Free) == 0 {
		// Nothing holds a block and nothing will free one: the request at
		// the head can never be admitted.
		delete(s.seqs, back[0].key)
		b.Unservable = append(b.Unservable, back[0].key)
		back = back[1:]
	}
	if len(back) > 0 {
		s.waiting = append(back, s.waiting...)
	}
	before := s.stats.Preemptions
	victim := func() kvcache.SeqID {
		q := s.running[len(s.running)-1]
		s.running = s.running[:len(s.running)-1]
		q.running = false
		if len(s.running) == 0 {
			// Its own append was refused with nothing else holding a
			// block: the whole pool cannot hold it.
			delete(s.seqs, q.key)
			b.Unservable = append(b.Unservable, q.key)
			return q.id
		}
		q.computed, q.unnamed = 0, 0
		s.waiting = append([]*liveSeq{q}, s.waiting...)
		return q.id
	}
	var retryTables func() *kvcache.TableRequest
	if tables != nil {
		retryTables = func() *kvcache.TableRequest { return s.tableRequest(tables, plan, false) }
	}
	if res, err = s.stats.preempt(ctx, kv, st.Append, sc.refused, res, victim, retryTables); err != nil {
		return b, err
	}
	if tables != nil && res.TablesErr != nil {
		return b, fmt.Errorf("step %d: block tables: %w", s.stats.Steps, res.TablesErr)
	}
	b.Preemptions = s.stats.Preemptions - before
	for _, p := range plan {
		q := p.q
		if !q.running {
			continue // refused, or preempted
		}
		bs := BatchSeq{Key: q.key, Seq: q.id, Pos: p.from, q: q}
		q.unnamed = 0
		switch {
		case p.pending:
			bs.Tokens, bs.PrevRow = pendingTokens, q.row
			q.unnamed = 1
		default:
			bs.Tokens = q.tokens[p.from : p.from+p.n]
		}
		if p.admit >= 0 {
			bs.CachedTokens = p.from
		}
		q.computed = p.from + p.n
		bs.Sample = q.computed == len(q.tokens)+q.pending
		if bs.Sample {
			q.pending++
			q.row = len(b.Seqs)
		}
		switch {
		case !bs.Sample:
			s.stats.Chunks++
		case p.admit < 0 && p.n == 1:
			s.stats.DecodeTokens++
		}
		b.Tokens += p.n
		b.Seqs = append(b.Seqs, bs)
	}
	b.Counts = res.Counts
	s.stats.note(res.Counts)
	s.stats.Steps++
	s.inflight++
	return b, nil
}

// plan fills st's appends and admissions under the step's budgets (see
// Live: decodes, then running prefills, then admissions) and returns them
// in that order.
func (s *Live) plan(st *kvcache.Step) []planned {
	plan := s.scratch.plan[:0]
	budget := s.opts.MaxBatchTokens
	for _, q := range s.running { // decodes: one token each
		if budget == 0 {
			break
		}
		// A token the step in flight samples (pending) is decoded with
		// PendingToken, its slot taken by count, unless it is the
		// sequence's last.
		if len(q.tokens)+q.pending-q.computed == 1 && q.generated()+q.pending < q.maxTokens {
			a := kvcache.Append{Seq: q.id, Tokens: q.tokens[q.computed-q.unnamed : q.computed+1-q.pending], Pending: q.pending}
			st.Append = append(st.Append, a)
			plan = append(plan, planned{q: q, admit: -1, from: q.computed, n: 1, pending: q.pending > 0})
			budget--
		}
	}
	for _, q := range s.running { // prompts being prefilled: a chunk each
		if budget == 0 {
			break
		}
		if rest := len(q.tokens) + q.pending - q.computed; rest > 1 {
			n := min(rest, budget)
			st.Append = append(st.Append, kvcache.Append{Seq: q.id, Tokens: q.tokens[q.computed-q.unnamed : q.computed+n]})
			plan = append(plan, planned{q: q, admit: -1, from: q.computed, n: n})
			budget -= n
		}
	}
	admitting := 0
	for _, q := range s.waiting { // admissions: the first chunk past the cached prefix
		// A sequence preempted while a step samples its token waits for
		// that token's commit.
		if budget == 0 || len(s.running)+admitting >= s.opts.MaxBatchSize || q.pending > 0 {
			break
		}
		n := min(len(q.tokens), budget)
		s.nextID++
		q.id = s.nextID
		st.Admit = append(st.Admit, kvcache.Admit{Seq: q.id, Tokens: q.tokens, MaxNewTokens: n})
		plan = append(plan, planned{q: q, admit: len(st.Admit) - 1})
		budget -= n // at most: a cached prefix leaves the chunk shorter
		admitting++
	}
	clear(s.waiting[:admitting])
	s.waiting = s.waiting[admitting:]
	s.scratch.plan = plan
	return plan
}

// tableRequest is the step's request for the batch's block tables: every
// planned sequence (first: the pool leaves out the admissions it refuses),
// or those still running (a preemption round).
func (s *Live) tableRequest(t *Tables, plan []planned, first bool) *kvcache.TableRequest {
	ids := s.scratch.ids[:0]
	for _, p := range plan {
		if first || p.q.running {
			ids = append(ids, p.q.id)
		}
	}
	s.scratch.ids = ids
	s.scratch.table = kvcache.TableRequest{Group: t.Group, Shape: t.Shape, Batch: ids, Dst: t.Dst}
	return &s.scratch.table
}
