package serving

import (
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/kvcache"
)

// ErrTooLong is wrapped by the *LengthError Live.Add returns for a request
// longer than one sequence may be.
var ErrTooLong = errors.New("serving: request longer than the limit")

// LengthError is a request Live.Add refused for its length: its prompt and
// max_tokens together pass Limit, max_seq_len. (A prompt longer than
// max_batch_tokens is prefilled in chunks over several steps, so the step's
// token budget does not limit a request.)
type LengthError struct {
	// PromptTokens and MaxTokens are what the request asked; Limit the most
	// their sum may be.
	PromptTokens, MaxTokens, Limit int
}

// Error says what was asked and the limit.
func (e *LengthError) Error() string {
	return fmt.Sprintf("%d prompt tokens + %d max_tokens = %d tokens, more than the limit of %d (max_seq_len)",
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
	// Tokens are the token ids the forward computes for the sequence this
	// step, the only ones whose KV it writes: a decode's last sampled
	// token, or a prefill chunk (the next part of its prompt — after a
	// preemption, of its prompt and the tokens it had generated — past
	// what the pool already holds: CachedTokens for an admission). A
	// decode scheduled while the step that samples its token still runs
	// (see Live: overlapped steps) has the one token PendingToken: the
	// forward takes it from that step's output, row PrevRow.
	Tokens []int32
	// PrevRow is, for Tokens [PendingToken], the sequence's row in the
	// batch scheduled before this one, whose sampled token it computes.
	PrevRow int
	// Pos is the position of Tokens[0] in the sequence; the step's last
	// position is Pos + len(Tokens) − 1.
	Pos int
	// CachedTokens is how many prompt tokens of an admission the prefix
	// cache held (0 for a running sequence).
	CachedTokens int
	// Sample is whether the step samples the sequence's next token, after
	// its last position: a decode, or the chunk that ends its prompt. A
	// chunk that leaves part of the prompt for later samples nothing (vLLM
	// discards the token its model runner samples for a partial prefill:
	// vllm/v1/worker/gpu_model_runner.py, discard_request_indices).
	Sample bool

	q *liveSeq // the request's state, for Commit
}

// Batch is one scheduled step: the sequences the forward computes and
// what the step did. Its slices are the scheduler's: Seqs is valid until
// the Schedule after next (a step's batch outlives the scheduling of the
// step after it), the others until the next Schedule.
type Batch struct {
	// Seqs is the batch, at most max_batch_size sequences: the running
	// sequences that decode (oldest admission first), then the running
	// ones whose prompts are being prefilled, then this step's admissions.
	Seqs []BatchSeq
	// Tokens is the tokens the forward computes, the sum of the Seqs'
	// len(Tokens): at most max_batch_tokens.
	Tokens int
	// Freed is the requests whose blocks this step gave back (finished or
	// cancelled); Unservable the requests dropped because the whole pool
	// cannot hold them.
	Freed, Unservable []Key
	// Counts is each group's blocks after the step.
	Counts []kvcache.GroupCounts
	// Preemptions is how many running sequences this step preempted.
	Preemptions int
}

// PendingToken stands, in BatchSeq.Tokens, for the token the previous
// step samples for the sequence, which the scheduler does not know when it
// plans this one (vLLM's async scheduling uses a placeholder the same way:
// vllm/v1/core/sched/async_scheduler.py; SGLang's overlap scheduler
// resolves "future" token ids on the device). The forward reads it from
// the previous step's output; a real model keeps the sampled ids on the
// device and gathers them into the next step's input_ids.
const PendingToken int32 = -1

// pendingTokens is the Tokens of a decode of a pending token (read-only).
var pendingTokens = []int32{PendingToken}

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
	key Key
	id  kvcache.SeqID
	// tokens is the prompt, then the tokens sampled so far.
	tokens    []int32
	promptLen int
	maxTokens int
	// computed is how many tokens the pool holds (their KV computed, or
	// computed by a step scheduled); 0 while waiting. With a step in
	// flight it may count the token that step samples (pending).
	computed int
	// pending is how many tokens steps scheduled and not committed will
	// sample for q (0 or 1); unnamed how many of the pool's last tokens
	// were appended before their ids were known (kvcache.Append.Pending),
	// named by q's next append.
	pending, unnamed int
	// row is q's row in the last batch that samples it (PrevRow).
	row int
	// running is set while q is in Live.running: not cancelled, finished
	// or preempted; done once it is cancelled or finished.
	running, done bool
}

// generated is how many tokens q has sampled.
func (q *liveSeq) generated() int { return len(q.tokens) - q.promptLen }

// Live is a continuous-batching scheduler with chunked prefill for
// requests that arrive while it runs, as an inference server sees them:
// Add and Cancel at any time between steps, then each step Schedule (one
// kvcache.Step through the KV block pool), the caller's forward over the
// Batch, and Commit of the tokens it sampled. It is not safe for
// concurrent use: one goroutine owns it.
//
// A step follows vLLM's v1 scheduler (vllm/v1/core/sched/scheduler.py,
// schedule()) under a budget of max_batch_tokens tokens: the running
// sequences that decode first, one token each; then the running sequences
// still prefilling, oldest first, each a chunk of what is left of its
// prompt, as much as the budget allows; then waiting requests while
// max_batch_size and the budget allow, each with the first chunk of its
// prompt past its cached prefix. A prompt longer than the budget is thus
// prefilled over several steps and samples its first token in the step
// that computes its last chunk; decodes never wait behind a long prompt.
// Frees come first (finished or cancelled sequences), and an append the
// pool refuses for exhaustion preempts the newest sequence by recompute.
//
// Steps may overlap: Schedule may plan step N+1 before the Commit of step
// N, while N's forward runs — vLLM's async scheduling
// (vllm/v1/core/sched/async_scheduler.py) and SGLang's overlap scheduler,
// which hide the scheduler's time behind the device's. A sequence that
// samples in step N then decodes in step N+1 with PendingToken (its KV
// slot taken by count: kvcache.Append.Pending, named at its next append),
// unless step N's token is its last by max_tokens; a sequence cancelled
// or stopped while both steps run wastes its slot in step N+1, whose
// output Commit drops. At most one step is scheduled and not committed
// when Schedule is called; Commits come in Schedule order.
//
// Blocks are taken per chunk, as vLLM does: an admission takes blocks for
// its cached prefix and its first chunk (kvcache.Admit.MaxNewTokens, which
// still looks the prefix up over the whole prompt), later chunks by
// kvcache.Append. So the pool holds, and caches as prefixes, only blocks
// whose KV is computed by the time the step's forward ends — a prompt
// preempted halfway leaves no cached block of tokens never computed — and
// the block tables a step writes cover exactly the tokens computed so far.
// Taking the whole prompt's blocks at admission would be simpler, but it
// would cache blocks before their KV exists and hold blocks a long prompt
// does not need yet.
type Live struct {
	opts      Options
	limit     int
	nextID    kvcache.SeqID
	seqs      map[Key]*liveSeq
	waiting   []*liveSeq // arrival order; preempted sequences go back first
	running   []*liveSeq // admission order
	finishing []*liveSeq // finished or cancelled running sequences, freed at the next step
	stats     Stats
	scratch   stepScratch
	// inflight is how many scheduled steps are not yet committed (0–2).
	inflight int
}

// NewLive returns a Live scheduler under opts. Errors: an option below 1,
// wrapping ErrInvalidTrace.
func NewLive(opts Options) (*Live, error) {
	if opts.MaxBatchSize < 1 || opts.MaxBatchTokens < 1 || opts.MaxSeqLen < 1 || opts.Vocab < 1 {
		return nil, fmt.Errorf("%w: max_batch_size %d, max_batch_tokens %d, max_seq_len %d, vocab %d: each must be ≥ 1", ErrInvalidTrace, opts.MaxBatchSize, opts.MaxBatchTokens, opts.MaxSeqLen, opts.Vocab)
	}
	return &Live{opts: opts, limit: opts.MaxSeqLen, seqs: map[Key]*liveSeq{}, scratch: stepScratch{refused: map[kvcache.SeqID]bool{}}}, nil
}

// Limit is the most tokens (prompt + max_tokens) one request may have:
// max_seq_len. A server also bounds it by what its KV cache holds: a
// request the whole pool cannot hold is dropped as Unservable.
func (s *Live) Limit() int { return s.limit }

// Add queues a request behind those waiting. Errors: a *LengthError
// (ErrTooLong) past Limit; an error for an empty prompt, a MaxTokens
// below 1, a token id outside [0, vocab) or a key already live.
func (s *Live) Add(k Key, r LiveRequest) error {
	switch {
	case len(r.Prompt) < 1 || r.MaxTokens < 1:
		return fmt.Errorf("serving: request %d: %d prompt tokens, max_tokens %d: both must be ≥ 1", k, len(r.Prompt), r.MaxTokens)
	case r.MaxTokens > s.limit || len(r.Prompt) > s.limit-r.MaxTokens:
		return &LengthError{PromptTokens: len(r.Prompt), MaxTokens: r.MaxTokens, Limit: s.limit}
	case s.seqs[k] != nil:
		return fmt.Errorf("serving: request %d is already live", k)
	}
	for i, t := range r.Prompt {
		if t < 0 || t >= s.opts.Vocab {
			return fmt.Errorf("serving: request %d: prompt token %d is %d, outside [0, vocab %d)", k, i, t, s.opts.Vocab)
		}
	}
	tokens := make([]int32, len(r.Prompt), len(r.Prompt)+min(r.MaxTokens, 256))
	copy(tokens, r.Prompt)
	q := &liveSeq{key: k, tokens: tokens, promptLen: len(r.Prompt), maxTokens: r.MaxTokens}
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
	q.done = true
	if q.running {
		q.running = false
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

// Running is the sequences holding blocks: decoding, or prefilling.
func (s *Live) Running() int { return len(s.running) }

// Stats returns the counts so far (Finished counts requests that reached
// MaxTokens; cancelled ones are not counted). PeakUsedBlocks is the
// scheduler's own slice: copy it to keep it.
func (s *Live) Stats() Stats { return s.stats }

// Commit takes the tokens the forward sampled, one per b.Seqs in order
// (those of sequences that do not Sample are ignored), and returns each
// sampling request's output; a request that reached its MaxTokens is
// finished and freed at the next Schedule. Batches are committed in the
// order they were scheduled. A request cancelled or finished since b was
// scheduled gets nothing; one preempted since keeps its token. The
// returned slice is reused by the next Commit. Errors: a token count
// other than len(b.Seqs), or no step to commit.
func (s *Live) Commit(b Batch, tokens []int32) ([]Output, error) {
	if len(tokens) != len(b.Seqs) {
		return nil, fmt.Errorf("serving: commit of %d tokens for a batch of %d", len(tokens), len(b.Seqs))
	}
	if s.inflight == 0 {
		return nil, fmt.Errorf("serving: commit of a batch of %d with no step scheduled", len(b.Seqs))
	}
	s.inflight--
	out := s.scratch.outputs[:0]
	for i, bs := range b.Seqs {
		if !bs.Sample {
			continue
		}
		q := bs.q
		if q == nil || q.id != bs.Seq || q.done {
			continue // cancelled or finished while the forward ran, or not this scheduler's
		}
		q.pending--
		q.tokens = append(q.tokens, tokens[i])
		o := Output{Key: bs.Key, Token: tokens[i]}
		if q.generated() >= q.maxTokens {
			o.Finished = true
			s.stats.Finished++
			delete(s.seqs, q.key)
			q.done = true
			if q.running {
				q.running = false
				s.running = removeSeq(s.running, q)
				s.finishing = append(s.finishing, q)
			} else {
				// Preempted by the step scheduled after b: the pool
				// already freed its blocks.
				s.waiting = removeSeq(s.waiting, q)
			}
		}
		out = append(out, o)
	}
	s.scratch.outputs = out
	return out, nil
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
