package serving

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/kvcache"
)

// ErrTooLong is wrapped by the *LengthError Live.Add returns for a request
// longer than one sequence may be.
var ErrTooLong = errors.New("serving: request longer than the limit")

// LengthError is a request Live.Add refused for its length: its prompt and
// max_tokens together pass Limit, min(max_batch_tokens, max_seq_len) (a
// preempted sequence is computed again whole in one step, so it must fit
// one step's token budget).
type LengthError struct {
	// PromptTokens and MaxTokens are what the request asked; Limit the most
	// their sum may be.
	PromptTokens, MaxTokens, Limit int
}

// Error says what was asked and the limit.
func (e *LengthError) Error() string {
	return fmt.Sprintf("%d prompt tokens + %d max_tokens = %d tokens, more than the limit of %d (min(max_batch_tokens, max_seq_len))",
		e.PromptTokens, e.MaxTokens, e.PromptTokens+e.MaxTokens, e.Limit)
}

// Unwrap returns ErrTooLong.
func (e *LengthError) Unwrap() error { return ErrTooLong }

// Key names a live request; the caller chooses it, unique among the
// requests it has added and not seen finish.
type Key uint64

// LiveRequest is one request a server adds to a Live scheduler.
type LiveRequest struct {
	// Prompt is the prompt's token ids (at least one).
	Prompt []int32
	// MaxTokens is the most tokens it generates (≥ 1).
	MaxTokens int
}

// BatchSeq is one sequence of a step's batch: what the forward computes
// for it, and where.
type BatchSeq struct {
	// Key is the request; Seq its sequence in the KV block pool (a new one
	// after each preemption).
	Key Key
	Seq kvcache.SeqID
	// Tokens are the token ids the forward computes: a decode step's last
	// sampled token, or an admission's prompt (and, after a preemption,
	// the tokens it had generated) past its CachedTokens.
	Tokens []int32
	// Pos is the position of Tokens[0] in the sequence; the forward
	// samples the next token after position Pos + len(Tokens) − 1.
	Pos int
	// CachedTokens is how many prompt tokens of an admission the prefix
	// cache held (0 for a decode step).
	CachedTokens int
}

// Batch is one scheduled step: the sequences the forward computes, oldest
// admission first, and what the step did.
type Batch struct {
	// Seqs is the batch (at most max_batch_size; their Tokens together at
	// most max_batch_tokens).
	Seqs []BatchSeq
	// Freed is the requests whose blocks this step gave back (finished or
	// cancelled); Unservable the requests refused because they need more
	// blocks than the whole pool has (they are dropped).
	Freed, Unservable []Key
	// Counts is each group's blocks after the step.
	Counts []kvcache.GroupCounts
	// Preemptions is how many running sequences this step preempted.
	Preemptions int
}

// Output is one request's sampled token after a step.
type Output struct {
	Key   Key
	Token int32
	// Finished is set when the request reached its MaxTokens with this
	// token; it is freed at the next Schedule.
	Finished bool
}

// liveSeq is one live request while it is waiting or running.
type liveSeq struct {
	key       Key
	id        kvcache.SeqID
	prompt    []int32
	maxTokens int
	output    []int32 // sampled so far
	running   bool
}

// Live is a continuous-batching scheduler for requests that arrive while
// it runs, as an inference server sees them: Add and Cancel at any time
// between steps, then each step Schedule (one kvcache.Step through the KV
// block pool: frees, one appended token per running sequence, admissions
// while max_batch_size, max_batch_tokens and the blocks allow, preemption
// of the newest sequence by recompute when an append finds the pool
// exhausted), the caller's forward over the Batch, and Commit of the
// tokens it sampled. It is Scheduler's policy (vLLM's v1 scheduler,
// vllm/v1/core/sched/scheduler.py, schedule(), without chunked prefill)
// with the tokens coming from the forward instead of a trace. It is not
// safe for concurrent use: one goroutine owns it.
type Live struct {
	opts      Options
	limit     int
	nextID    kvcache.SeqID
	seqs      map[Key]*liveSeq
	waiting   []*liveSeq // arrival order; preempted sequences go back first
	running   []*liveSeq // admission order
	finishing []*liveSeq // finished or cancelled running sequences, freed at the next step
	stats     Stats
}

// NewLive returns a Live scheduler under opts. Errors: an option below 1,
// wrapping ErrInvalidTrace.
func NewLive(opts Options) (*Live, error) {
	if opts.MaxBatchSize < 1 || opts.MaxBatchTokens < 1 || opts.MaxSeqLen < 1 || opts.Vocab < 1 {
		return nil, fmt.Errorf("%w: max_batch_size %d, max_batch_tokens %d, max_seq_len %d, vocab %d: each must be ≥ 1", ErrInvalidTrace, opts.MaxBatchSize, opts.MaxBatchTokens, opts.MaxSeqLen, opts.Vocab)
	}
	return &Live{opts: opts, limit: min(opts.MaxBatchTokens, opts.MaxSeqLen), seqs: map[Key]*liveSeq{}}, nil
}

// Limit is the most tokens (prompt + max_tokens) one request may have:
// min(max_batch_tokens, max_seq_len).
func (s *Live) Limit() int { return s.limit }

// Add queues a request behind those waiting. Errors: a *LengthError
// (ErrTooLong) past Limit; an error for an empty prompt, a MaxTokens
// below 1, a token id outside [0, vocab) or a key already live.
func (s *Live) Add(k Key, r LiveRequest) error {
	switch {
	case len(r.Prompt) < 1 || r.MaxTokens < 1:
		return fmt.Errorf("serving: request %d: %d prompt tokens, max_tokens %d: both must be ≥ 1", k, len(r.Prompt), r.MaxTokens)
	case len(r.Prompt)+r.MaxTokens > s.limit:
		return &LengthError{PromptTokens: len(r.Prompt), MaxTokens: r.MaxTokens, Limit: s.limit}
	case s.seqs[k] != nil:
		return fmt.Errorf("serving: request %d is already live", k)
	}
	for i, t := range r.Prompt {
		if t < 0 || t >= s.opts.Vocab {
			return fmt.Errorf("serving: request %d: prompt token %d is %d, outside [0, vocab %d)", k, i, t, s.opts.Vocab)
		}
	}
	q := &liveSeq{key: k, prompt: append([]int32(nil), r.Prompt...), maxTokens: r.MaxTokens}
	s.seqs[k] = q
	s.waiting = append(s.waiting, q)
	return nil
}

// Cancel ends request k (a client gone, a stop string matched): a waiting
// request is dropped at once, a running one is freed at the next
// Schedule. It reports whether k was live.
func (s *Live) Cancel(k Key) bool {
	q := s.seqs[k]
	if q == nil {
		return false
	}
	delete(s.seqs, k)
	if q.running {
		s.running = removeSeq(s.running, q)
		s.finishing = append(s.finishing, q)
		return true
	}
	s.waiting = removeSeq(s.waiting, q)
	return true
}

// Idle reports whether nothing waits, runs or waits to be freed: Schedule
// has nothing to do until Add.
func (s *Live) Idle() bool {
	return len(s.waiting) == 0 && len(s.running) == 0 && len(s.finishing) == 0
}

// Waiting and Running are the requests queued and in the batch now.
func (s *Live) Waiting() int { return len(s.waiting) }

// Running is the sequences holding blocks and generating.
func (s *Live) Running() int { return len(s.running) }

// Stats returns the counts so far (Finished counts requests that reached
// MaxTokens; cancelled ones are not counted).
func (s *Live) Stats() Stats { return s.stats }

// Schedule runs the scheduling half of one step (see Live) and returns the
// batch the forward computes. Commit must follow before the next Schedule.
// Errors: kv's, or a refusal other than exhaustion (a scheduler bug),
// wrapped with the step; on an error the scheduler's state is undefined.
func (s *Live) Schedule(ctx context.Context, kv KV) (Batch, error) {
	var b Batch
	st := kvcache.Step{}
	for _, q := range s.finishing {
		st.Free = append(st.Free, q.id)
		b.Freed = append(b.Freed, q.key)
	}
	s.finishing = nil
	for _, q := range s.running {
		st.Append = append(st.Append, kvcache.Append{Seq: q.id, Tokens: []int32{q.output[len(q.output)-1]}})
	}
	budget := s.opts.MaxBatchTokens - len(st.Append)
	var admitting []*liveSeq
	for _, q := range s.waiting {
		if len(s.running)+len(admitting) >= s.opts.MaxBatchSize {
			break
		}
		ids := q.ids()
		if len(ids) > budget {
			break
		}
		budget -= len(ids)
		s.nextID++
		q.id = s.nextID
		st.Admit = append(st.Admit, kvcache.Admit{Seq: q.id, Tokens: ids})
		admitting = append(admitting, q)
	}
	s.waiting = s.waiting[len(admitting):]
	res, err := s.stats.apply(ctx, kv, st, s.stats.Steps)
	if err != nil {
		return b, err
	}
	refusedAppend := map[kvcache.SeqID]bool{}
	refusedAdmit := map[int]bool{}
	for _, e := range res.Errors {
		if !errors.Is(e.Err, kvcache.ErrExhausted) {
			return b, fmt.Errorf("step %d: %s %d refused: %w", s.stats.Steps, e.Op, e.Index, e.Err)
		}
		if e.Op == kvcache.OpAppend {
			refusedAppend[st.Append[e.Index].Seq] = true
		} else {
			refusedAdmit[e.Index] = true
		}
	}
	var back []*liveSeq
	cached := map[*liveSeq]int{}
	for i, q := range admitting {
		if refusedAdmit[i] {
			back = append(back, q)
			continue
		}
		s.stats.Admitted++
		s.stats.PrefillTokens += len(st.Admit[i].Tokens)
		s.stats.CachedTokens += res.CachedTokens[i]
		cached[q] = res.CachedTokens[i]
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
	s.waiting = append(back, s.waiting...)
	before := s.stats.Preemptions
	victim := func() kvcache.SeqID {
		q := s.running[len(s.running)-1]
		s.running = s.running[:len(s.running)-1]
		q.running = false
		s.waiting = append([]*liveSeq{q}, s.waiting...)
		return q.id
	}
	if res, err = s.stats.preempt(ctx, kv, s.stats.Steps, st.Append, refusedAppend, res, victim); err != nil {
		return b, err
	}
	b.Preemptions = s.stats.Preemptions - before
	for _, q := range s.running {
		bs := BatchSeq{Key: q.key, Seq: q.id}
		if c, ok := cached[q]; ok {
			ids := q.ids()
			from := min(c, len(ids)-1) // the last token is computed to sample the next
			bs.Tokens, bs.Pos, bs.CachedTokens = ids[from:], from, c
		} else {
			bs.Tokens, bs.Pos = q.output[len(q.output)-1:], len(q.prompt)+len(q.output)-1
			s.stats.DecodeTokens++
		}
		b.Seqs = append(b.Seqs, bs)
	}
	b.Counts = res.Counts
	s.stats.note(res.Counts)
	s.stats.Steps++
	return b, nil
}

// Commit takes the tokens the forward sampled, one per b.Seqs in order,
// and returns each request's output; a request that reached its MaxTokens
// is finished and freed at the next Schedule. Errors: a token count other
// than len(b.Seqs).
func (s *Live) Commit(b Batch, tokens []int32) ([]Output, error) {
	if len(tokens) != len(b.Seqs) {
		return nil, fmt.Errorf("serving: commit of %d tokens for a batch of %d", len(tokens), len(b.Seqs))
	}
	out := make([]Output, 0, len(tokens))
	for i, bs := range b.Seqs {
		q := s.seqs[bs.Key]
		if q == nil || q.id != bs.Seq || !q.running {
			continue // cancelled while the forward ran
		}
		q.output = append(q.output, tokens[i])
		o := Output{Key: bs.Key, Token: tokens[i]}
		if len(q.output) >= q.maxTokens {
			o.Finished = true
			s.stats.Finished++
			delete(s.seqs, q.key)
			s.running = removeSeq(s.running, q)
			s.finishing = append(s.finishing, q)
		}
		out = append(out, o)
	}
	return out, nil
}

// ids is what an admission of q computes: its prompt and, after a
// preemption, the tokens it had generated (recompute).
func (q *liveSeq) ids() []int32 {
	return append(append(make([]int32, 0, len(q.prompt)+len(q.output)), q.prompt...), q.output...)
}

// removeSeq removes q from list, keeping the order.
func removeSeq(list []*liveSeq, q *liveSeq) []*liveSeq {
	for i, x := range list {
		if x == q {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}
