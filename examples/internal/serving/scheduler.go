package serving

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gpuarena/gpuarena/kvcache"
)

// KV applies one scheduler step to a KV block pool and returns what it did:
// gpuarena.Manager.KVStep (through the KV cache actor), or a kvcache.Pool's
// Apply.
type KV interface {
	KVStep(ctx context.Context, s kvcache.Step) (kvcache.StepResult, error)
}

// ErrUnservable is returned by Step when a request needs more blocks than
// the whole pool has: nothing runs, and it still cannot be admitted.
var ErrUnservable = errors.New("serving: request larger than the KV cache")

// Options are a Scheduler's limits, named as the serving options.
type Options struct {
	// MaxBatchSize is max_batch_size: the most sequences running at once.
	MaxBatchSize int
	// MaxBatchTokens is max_batch_tokens: the tokens one forward step
	// computes, one per running sequence plus the prompts admitted whole.
	MaxBatchTokens int
	// MaxSeqLen is max_seq_len, the longest sequence (prompt and output).
	MaxSeqLen int
	// Vocab is the model's vocab_size, the range of the token ids.
	Vocab int32
}

// Stats count what a Scheduler did.
type Stats struct {
	// Steps is the scheduler steps run; Admitted the admissions (a
	// preempted sequence admitted again counts again); Finished the
	// requests that generated all their tokens; Preemptions the running
	// sequences freed to make room, to be computed again.
	Steps, Admitted, Finished, Preemptions int
	// PrefillTokens is the prompt tokens admitted, CachedTokens those of
	// them found in the prefix cache, DecodeTokens the tokens appended.
	PrefillTokens, CachedTokens, DecodeTokens int
	// PeakUsedBlocks is each group's most blocks (slots) in use at the end
	// of a step.
	PeakUsedBlocks []int
	// RoundTrips is the KVStep calls: one per step, one more per
	// preemption round.
	RoundTrips int
}

// StepReport is one step: the sequences the step's forward computes (the
// running ones, oldest first, those admitted this step last) and the pool's
// counts after it.
type StepReport struct {
	Step   int
	Batch  []kvcache.SeqID
	Counts []kvcache.GroupCounts
}

// seq is one request while it is waiting or running.
type seq struct {
	req       *Request
	id        kvcache.SeqID
	generated int // output tokens sampled so far
}

// Scheduler serves a Trace step by step; it is not safe for concurrent
// use. NewScheduler makes one.
type Scheduler struct {
	opts      Options
	trace     *Trace
	arrived   int // requests of the trace moved to waiting
	step      int
	nextID    kvcache.SeqID
	waiting   []*seq // arrival order; preempted sequences go back first
	running   []*seq // admission order
	finishing []kvcache.SeqID
	stats     Stats
}

// NewScheduler returns a scheduler of t under opts. Errors: an option below
// 1, or t.Validate's error for a request these limits cannot serve (every
// sequence must fit in one step whole, so that a preempted one can be
// computed again: prompt + output ≤ min(max_batch_tokens, max_seq_len)).
func NewScheduler(t *Trace, opts Options) (*Scheduler, error) {
	if opts.MaxBatchSize < 1 || opts.MaxBatchTokens < 1 || opts.MaxSeqLen < 1 || opts.Vocab < 1 {
		return nil, fmt.Errorf("%w: max_batch_size %d, max_batch_tokens %d, max_seq_len %d, vocab %d: each must be ≥ 1", ErrInvalidTrace, opts.MaxBatchSize, opts.MaxBatchTokens, opts.MaxSeqLen, opts.Vocab)
	}
	if err := t.Validate(opts.MaxBatchTokens, min(opts.MaxBatchTokens, opts.MaxSeqLen)); err != nil {
		return nil, err
	}
	return &Scheduler{opts: opts, trace: t}, nil
}

// Done reports whether every request of the trace has finished and been
// freed.
func (s *Scheduler) Done() bool {
	return s.arrived == len(s.trace.Requests) && len(s.waiting) == 0 && len(s.running) == 0 && len(s.finishing) == 0
}

// Stats returns the counts so far.
func (s *Scheduler) Stats() Stats {
	st := s.stats
	st.PeakUsedBlocks = slices.Clone(st.PeakUsedBlocks)
	return st
}

// Step runs one scheduler step: it frees the sequences that finished in
// the last step, appends one token to every running sequence, admits
// waiting requests (oldest first) while max_batch_size and the step's
// token budget allow, and sends it all as one kvcache.Step. An append the
// pool refuses for exhaustion preempts the newest running sequence (freed,
// back to the head of the queue, its prompt and generated tokens to be
// computed again) and is sent again, one more round trip per round, until
// it fits or is itself the one preempted; an admission refused for
// exhaustion waits for a later step. Errors: kv's, or a refusal other than
// exhaustion (a scheduler bug), wrapped with the step.
func (s *Scheduler) Step(ctx context.Context, kv KV) (StepReport, error) {
	for s.arrived < len(s.trace.Requests) && s.trace.Requests[s.arrived].ArrivalStep <= s.step {
		s.waiting = append(s.waiting, &seq{req: &s.trace.Requests[s.arrived]})
		s.arrived++
	}
	st := kvcache.Step{Free: s.finishing}
	s.finishing = nil
	for _, q := range s.running {
		st.Append = append(st.Append, kvcache.Append{Seq: q.id, Tokens: []int32{s.outputID(q, q.generated-1)}})
	}
	budget := s.opts.MaxBatchTokens - len(st.Append)
	var admitting []*seq
	for len(s.waiting) > 0 && len(s.running)+len(admitting) < s.opts.MaxBatchSize {
		q := s.waiting[0]
		prompt := s.promptIDs(q)
		if len(prompt) > budget {
			break
		}
		budget -= len(prompt)
		s.nextID++
		q.id = s.nextID
		st.Admit = append(st.Admit, kvcache.Admit{Seq: q.id, Tokens: prompt})
		admitting = append(admitting, q)
		s.waiting = s.waiting[1:]
	}
	res, err := s.stats.apply(ctx, kv, st, s.step)
	if err != nil {
		return StepReport{}, err
	}
	refusedAppend := map[kvcache.SeqID]bool{}
	refusedAdmit := map[int]bool{}
	for _, e := range res.Errors {
		if !errors.Is(e.Err, kvcache.ErrExhausted) {
			return StepReport{}, fmt.Errorf("step %d: %s %d refused: %w", s.step, e.Op, e.Index, e.Err)
		}
		if e.Op == kvcache.OpAppend {
			refusedAppend[st.Append[e.Index].Seq] = true
		} else {
			refusedAdmit[e.Index] = true
		}
	}
	// Requests refused for room go back to the head of the queue, in order.
	var back []*seq
	for i, q := range admitting {
		if refusedAdmit[i] {
			back = append(back, q)
			continue
		}
		s.stats.Admitted++
		s.stats.PrefillTokens += len(st.Admit[i].Tokens)
		s.stats.CachedTokens += res.CachedTokens[i]
		q.generated++ // the prefill samples the next token
		s.running = append(s.running, q)
	}
	s.waiting = append(back, s.waiting...)
	if len(back) > 0 && len(s.running) == 0 && len(st.Free) == 0 && len(s.finishing) == 0 {
		// Nothing holds a block and nothing will free one: the request at
		// the head can never be admitted.
		for _, e := range res.Errors {
			if e.Op == kvcache.OpAdmit {
				return StepReport{}, fmt.Errorf("step %d: request %q: %w: %w", s.step, back[0].req.ID, ErrUnservable, e.Err)
			}
		}
	}
	victim := func() kvcache.SeqID {
		q := s.running[len(s.running)-1]
		s.running = s.running[:len(s.running)-1]
		s.waiting = append([]*seq{q}, s.waiting...)
		return q.id
	}
	if res, err = s.stats.preempt(ctx, kv, s.step, st.Append, refusedAppend, res, victim); err != nil {
		return StepReport{}, err
	}
	appended := make(map[kvcache.SeqID]bool, len(st.Append))
	for _, a := range st.Append {
		appended[a.Seq] = true
	}
	batch := make([]kvcache.SeqID, 0, len(s.running))
	kept := s.running[:0]
	for _, q := range s.running {
		batch = append(batch, q.id)
		if appended[q.id] { // it computes the token it sampled last and samples one more
			q.generated++
			s.stats.DecodeTokens++
		}
		if q.generated >= q.req.OutputTokens {
			s.stats.Finished++
			s.finishing = append(s.finishing, q.id)
			continue
		}
		kept = append(kept, q)
	}
	s.running = kept
	s.stats.note(res.Counts)
	r := StepReport{Step: s.step, Batch: batch, Counts: res.Counts}
	s.step++
	s.stats.Steps++
	return r, nil
}

// promptIDs is what an admission of q computes: its prompt, and for a
// preempted sequence the tokens it had generated too (recompute).
func (s *Scheduler) promptIDs(q *seq) []int32 {
	ids := q.req.promptIDs(s.opts.Vocab)
	for i := range q.generated {
		ids = append(ids, s.outputID(q, i))
	}
	return ids
}

// outputID is the id of q's i-th generated token.
func (s *Scheduler) outputID(q *seq, i int) int32 {
	return tokenID(q.req.ID, q.req.PromptTokens+i, s.opts.Vocab)
}
