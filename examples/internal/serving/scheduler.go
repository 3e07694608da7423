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
// the whole pool has: nothing else holds a block, and it still does not fit.
var ErrUnservable = errors.New("serving: request larger than the KV cache")

// Options are a scheduler's limits, named as the serving options.
type Options struct {
	// MaxBatchSize is max_batch_size: the most sequences running at once.
	MaxBatchSize int
	// MaxBatchTokens is max_batch_tokens: the most tokens one forward step
	// computes — one per decoding sequence, plus prefill chunks.
	MaxBatchTokens int
	// MaxSeqLen is max_seq_len, the longest sequence (prompt and output).
	MaxSeqLen int
	// Vocab is the model's vocab_size, the range of the token ids.
	Vocab int32
}

// Stats count what a scheduler did.
type Stats struct {
	// Steps is the scheduler steps run; Admitted the admissions (a
	// preempted sequence admitted again counts again); Finished the
	// requests that generated all their tokens; Preemptions the running
	// sequences freed to make room, to be computed again.
	Steps, Admitted, Finished, Preemptions int
	// PrefillTokens is the prompt tokens admitted (whole prompts, however
	// many steps their prefill takes), CachedTokens those of them found in
	// the prefix cache, DecodeTokens the one-token appends that sample
	// (decode steps), Chunks the prefill chunks that left part of their
	// prompt for a later step.
	PrefillTokens, CachedTokens, DecodeTokens, Chunks int
	// PeakUsedBlocks is each group's most blocks (slots) in use at the end
	// of a step.
	PeakUsedBlocks []int
	// RoundTrips is the KVStep calls: one per step, one more per
	// preemption round.
	RoundTrips int
}

// StepReport is one step: the sequences the step's forward computes (in
// Live's batch order) and the pool's counts after it.
type StepReport struct {
	Step   int
	Batch  []kvcache.SeqID
	Counts []kvcache.GroupCounts
}

// Scheduler serves a Trace step by step through a Live scheduler (the
// same policy, chunked prefill included), sampling each request's output
// tokens from the trace (a function of the request and the position, so
// a preempted request recomputed gives the same tokens). It is not safe
// for concurrent use. NewScheduler makes one.
type Scheduler struct {
	live    *Live
	trace   *Trace
	vocab   int32
	arrived int // requests of the trace added
	step    int
}

// NewScheduler returns a scheduler of t under opts. Errors: an option below
// 1, or t.Validate's error for a request these limits cannot serve
// (prompt + output ≤ max_seq_len).
func NewScheduler(t *Trace, opts Options) (*Scheduler, error) {
	live, err := NewLive(opts)
	if err != nil {
		return nil, err
	}
	if err := t.Validate(opts.MaxSeqLen); err != nil {
		return nil, err
	}
	return &Scheduler{live: live, trace: t, vocab: opts.Vocab}, nil
}

// Done reports whether every request of the trace has finished and been
// freed.
func (s *Scheduler) Done() bool {
	return s.arrived == len(s.trace.Requests) && s.live.Idle()
}

// Stats returns the counts so far.
func (s *Scheduler) Stats() Stats {
	st := s.live.Stats()
	st.PeakUsedBlocks = slices.Clone(st.PeakUsedBlocks)
	return st
}

// Step runs one scheduler step: the requests arriving by now join the
// queue, Live.Schedule builds the batch (one kvcache.Step, one more round
// trip per preemption round), and each sequence that samples gets its
// next token from the trace. When nothing runs or waits, the step is the
// next request's arrival step: a server idles until a request comes, and
// runs no empty steps before it. Errors: kv's, or a refusal other than
// exhaustion (a scheduler bug), wrapped with the step; ErrUnservable
// (wrapping kvcache.ErrExhausted) for a request the whole pool cannot
// hold.
func (s *Scheduler) Step(ctx context.Context, kv KV) (StepReport, error) {
	if s.live.Idle() && s.arrived < len(s.trace.Requests) {
		s.step = max(s.step, s.trace.Requests[s.arrived].ArrivalStep)
	}
	for s.arrived < len(s.trace.Requests) && s.trace.Requests[s.arrived].ArrivalStep <= s.step {
		r := &s.trace.Requests[s.arrived]
		if err := s.live.Add(Key(s.arrived), LiveRequest{Prompt: r.promptIDs(s.vocab), MaxTokens: r.OutputTokens}); err != nil {
			return StepReport{}, fmt.Errorf("step %d: request %q: %w", s.step, r.ID, err)
		}
		s.arrived++
	}
	b, err := s.live.Schedule(ctx, kv, nil)
	if err != nil {
		return StepReport{}, err
	}
	if len(b.Unservable) > 0 {
		r := &s.trace.Requests[b.Unservable[0]]
		return StepReport{}, fmt.Errorf("step %d: request %q (%d prompt + %d output tokens): %w: %w", s.step, r.ID, r.PromptTokens, r.OutputTokens, ErrUnservable, kvcache.ErrExhausted)
	}
	r := StepReport{Step: s.step, Batch: make([]kvcache.SeqID, len(b.Seqs)), Counts: b.Counts}
	tokens := make([]int32, len(b.Seqs))
	for i, bs := range b.Seqs {
		r.Batch[i] = bs.Seq
		tokens[i] = tokenID(s.trace.Requests[bs.Key].ID, bs.Pos+len(bs.Tokens), s.vocab)
	}
	if _, err := s.live.Commit(b, tokens); err != nil {
		return StepReport{}, err
	}
	s.step++
	return r, nil
}
