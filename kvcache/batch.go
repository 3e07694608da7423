package kvcache

// Step is one scheduler step's changes to the pool, applied by Apply in
// this order, each list in its own order:
//
//  1. Free: finished (or preempted) sequences give their blocks back, so
//     the rest of the step can use them and their prefixes stay cached.
//  2. Fork: children share their parents' blocks (parallel sampling).
//  3. Append: running sequences grow (decode: one token each; speculative
//     decoding: k).
//  4. Admit: new sequences take their prompts' blocks, after every running
//     sequence has its blocks (as vLLM's scheduler serves running requests
//     before waiting ones); an admission can hit blocks an earlier
//     admission of the same step filled.
//
// Every request is all or nothing across the groups, and a refused request
// (a *SequenceError, or an *ExhaustedError when the blocks are short)
// changes nothing of its own and stops nothing else: the rest of the step
// still applies. A request naming a sequence an earlier phase of the same
// step freed or has not admitted yet is refused as unknown.
//
// Tables, when not nil, is read after the four phases: the batch's block
// tables as the step leaves them, so that a scheduler gets its step and
// the forward's block_tables in one round trip through the KV supervisor.
type Step struct {
	// Free lists the sequences to free.
	Free []SeqID
	// Fork lists the forks, Append the appends, Admit the admissions.
	Fork   []Fork
	Append []Append
	Admit  []Admit
	// Tables asks for a batch's block tables after the step; nil for none.
	Tables *TableRequest
}

// TableRequest asks Apply to write one group's block tables of a batch
// into Dst after the step, as EncodeBlockTables does (Shape's [Rows,
// Width] little-endian int32 layout, the arena's block_tables field). A
// sequence whose admission this step refused is left out, the rows after
// it moving up, so that a scheduler may list every admission it sent: the
// rows are then the batch it runs (StepResult.Errors names the refused
// admissions). Any other sequence the pool does not hold after the step
// fails the request (StepResult.TablesErr) and nothing is written.
type TableRequest struct {
	// Group is the group's index in Config.Groups.
	Group int
	// Shape is the block_tables field's rows and width.
	Shape TableShape
	// Batch is the sequences, one row each, in order.
	Batch []SeqID
	// Dst receives Shape.Rows·Shape.Width·4 bytes; the caller keeps it.
	Dst []byte
}

// Fork makes Child a copy of Parent that shares its blocks: full blocks
// stay shared, a shared partial last block is copied by whichever sequence
// writes to it first (a Copy in that step's result), and each state group
// gives Child a slot of its own, copied from Parent's (a Copy in this
// step's result). Refused when Parent is unknown, Child exists, or a state
// group has no free slot.
type Fork struct {
	// Parent is a sequence the pool holds; Child a new id.
	Parent, Child SeqID
}

// Append adds tokens to a running sequence: the tokens the next forward
// computes (the last sampled token, or k speculative ones).
// Sliding-window groups first give back the blocks that fall wholly before
// the window (as the sequence's tokens so far are computed; done even if
// the append is then refused: the sequence no longer needs them).
//
// Pending tokens are appended before their ids are known: a scheduler that
// plans step N+1 while step N's forward still runs (vLLM's async
// scheduling, vllm/v1/core/sched/async_scheduler.py; SGLang's overlap
// scheduler) takes the slot of the token step N samples without knowing
// it. Their slots are taken like any token's; the blocks they fill join
// the prefix cache only once a later Append names their ids: its Tokens
// give, oldest first, the ids of the sequence's pending tokens, then any
// new tokens.
type Append struct {
	// Seq is a sequence the pool holds; Tokens the token ids appended:
	// first the ids of tokens appended as pending before, then new ones.
	Seq    SeqID
	Tokens []int32
	// Pending is how many more tokens are appended, after Tokens, whose
	// ids a later Append gives (≥ 0). Tokens and Pending are not both
	// empty.
	Pending int
}

// grows is how many tokens a, appended to a sequence with pending tokens
// whose ids are not known yet, adds to it: its new tokens (those of Tokens
// past the pending ones they name) and its own pending ones.
func (a Append) grows(pending int) int {
	return max(len(a.Tokens)-pending, 0) + a.Pending
}

// Admit starts sequence Seq with its prompt (at least one token): the
// longest cached prefix is shared (StepResult.CachedTokens), the rest gets
// new blocks, and each state group gives it a slot. Extra is the
// sequence's extra keys (LoRA adapter, cache salt, multimodal content
// hashes, in any encoding): prompts share cached blocks only when their
// Extra is equal too. The pool copies what it keeps of Tokens and Extra.
//
// MaxNewTokens above 0 is chunked prefill: the prefix is looked up over
// the whole prompt, but the sequence takes blocks for the cached prefix
// and at most MaxNewTokens tokens after it — CachedTokens + min(
// MaxNewTokens, len(Tokens) − CachedTokens) tokens, the ones this step
// computes — and the rest of the prompt comes by Append in later steps,
// its blocks taken (and, once full, cached) as its chunks are computed.
// That is vLLM's Scheduler.schedule for a waiting request under a token
// budget (vllm/v1/core/sched/scheduler.py: num_new_tokens capped by the
// budget left, then KVCacheManager.allocate_slots for those tokens only).
// 0 (or less) takes the whole prompt.
type Admit struct {
	// Seq is a new id; Tokens the prompt's token ids.
	Seq    SeqID
	Tokens []int32
	// Extra is the sequence's extra keys, nil for none.
	Extra []byte
	// MaxNewTokens caps the uncached tokens admitted now; 0: no cap.
	MaxNewTokens int
}

// AdmittedTokens is how many of a's prompt tokens the sequence holds
// after an admission that found cached of them in the prefix cache
// (StepResult.CachedTokens): the whole prompt, or with MaxNewTokens the
// cached prefix and at most MaxNewTokens more.
func (a Admit) AdmittedTokens(cached int) int {
	n := len(a.Tokens)
	if a.MaxNewTokens > 0 {
		n = min(n, cached+a.MaxNewTokens)
	}
	return n
}

// Op is a kind of request in a Step, or a read that names a sequence.
type Op uint8

const (
	// OpFree is a Step.Free request.
	OpFree Op = iota + 1
	// OpFork is a Step.Fork request.
	OpFork
	// OpAppend is a Step.Append request.
	OpAppend
	// OpAdmit is a Step.Admit request.
	OpAdmit
	// OpTable is a BlockTable read (not a Step request).
	OpTable
)

// String is the op's name in errors.
func (o Op) String() string {
	switch o {
	case OpFree:
		return "free"
	case OpFork:
		return "fork"
	case OpAppend:
		return "append"
	case OpAdmit:
		return "admission"
	case OpTable:
		return "block table"
	default:
		return "op?"
	}
}

// RequestError is one refused request of a step.
type RequestError struct {
	// Op and Index locate the request: Step.Admit[Index] for OpAdmit.
	Op    Op
	Index int
	// Err is an *ExhaustedError (ErrExhausted) or a *SequenceError
	// (ErrUnknownSequence, ErrDuplicateSequence, ErrNoTokens,
	// ErrNegativePending, ErrPendingTokens).
	Err error
}

// Copy is a block (or state slot) a kernel must copy, whole, before the
// step's forward writes: Group's block Src into block Dst, for sequence Seq,
// which now holds Dst. A partial last block shared after a Fork is copied
// when one of its sequences appends to it; a state slot is copied when a
// sequence is forked.
type Copy struct {
	// Group is the group's index in Config.Groups.
	Group int
	// Seq is the sequence that now holds Dst.
	Seq SeqID
	// Src and Dst are block ids (state groups: slots) of Group.
	Src, Dst int32
}

// StepResult is what Apply did.
type StepResult struct {
	// CachedTokens[i] is how many of Step.Admit[i]'s prompt tokens were
	// found in the prefix cache: the forward computes only the tokens
	// after them. 0 for a refused admission.
	CachedTokens []int
	// Errors are the refused requests, in the order applied.
	Errors []RequestError
	// Copies are the copies to do before the forward, in order.
	Copies []Copy
	// Counts are each group's counts after the step.
	Counts []GroupCounts
	// TablesErr is why Step.Tables was not written (a *TableError,
	// ErrTableLayout); nil when it was, or when none was asked.
	TablesErr error
}

// Apply applies one scheduler step (see Step for the order and the
// all-or-nothing rule) and returns what happened. It never panics on bad
// requests: they are refused in StepResult.Errors.
func (p *Pool) Apply(s Step) StepResult {
	var r StepResult
	if len(s.Admit) > 0 {
		r.CachedTokens = make([]int, len(s.Admit))
	}
	for i, id := range s.Free {
		r.note(OpFree, i, p.free(id))
	}
	for i, f := range s.Fork {
		r.note(OpFork, i, p.fork(f, &r))
	}
	for i, a := range s.Append {
		r.note(OpAppend, i, p.append(a, &r))
	}
	for i, a := range s.Admit {
		h, err := p.admit(a)
		r.CachedTokens[i] = h
		r.note(OpAdmit, i, err)
	}
	r.Counts = p.Counts()
	if t := s.Tables; t != nil {
		r.TablesErr = p.EncodeBlockTables(t.Dst, t.Shape, t.Group, admittedBatch(t.Batch, s.Admit, r.Errors))
	}
	return r
}

// admittedBatch is batch less the sequences whose admission errs refused
// (a new slice only when there are some).
func admittedBatch(batch []SeqID, admits []Admit, errs []RequestError) []SeqID {
	var refused map[SeqID]bool
	for _, e := range errs {
		if e.Op == OpAdmit {
			if refused == nil {
				refused = map[SeqID]bool{}
			}
			refused[admits[e.Index].Seq] = true
		}
	}
	if refused == nil {
		return batch
	}
	kept := make([]SeqID, 0, len(batch))
	for _, id := range batch {
		if !refused[id] {
			kept = append(kept, id)
		}
	}
	return kept
}

// note records err, if any, as request i's refusal.
func (r *StepResult) note(op Op, i int, err error) {
	if err != nil {
		r.Errors = append(r.Errors, RequestError{Op: op, Index: i, Err: err})
	}
}
