package serving

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
)

// Request is one request of a trace. Its prompt is PrefixTokens tokens of
// the shared prefix Prefix (when PrefixTokens > 0), then tokens of its own,
// PromptTokens in all; it ends after OutputTokens generated tokens. Token
// ids are derived from (Prefix, position) and (ID, position), so two
// requests with the same Prefix share their first PrefixTokens ids, and a
// replayed trace gives the same ids.
type Request struct {
	// ID names the request; unique in a trace.
	ID string `json:"id"`
	// ArrivalStep is the scheduler step at which the request arrives (≥ 0).
	ArrivalStep int `json:"arrival_step"`
	// Prefix names the shared prefix ("" for none); PrefixTokens is how
	// many of the prompt's first tokens are that prefix's (≤ PromptTokens).
	Prefix       string `json:"prefix,omitempty"`
	PrefixTokens int    `json:"prefix_tokens,omitempty"`
	// PromptTokens is the prompt's length in tokens (≥ 1).
	PromptTokens int `json:"prompt_tokens"`
	// OutputTokens is the number of tokens the request generates (≥ 1).
	OutputTokens int `json:"output_tokens"`
}

// Trace is a serving workload: requests in arrival order.
type Trace struct {
	Requests []Request `json:"requests"`
}

// ErrInvalidTrace is wrapped by every error Validate and Load return for a
// trace that cannot be served.
var ErrInvalidTrace = errors.New("serving: invalid trace")

// Validate checks every request against the limit it will be served with:
// a sequence (prompt + output) of at most maxSeqLen tokens (a prompt
// longer than max_batch_tokens is prefilled in chunks). Errors wrap
// ErrInvalidTrace and name the request.
func (t *Trace) Validate(maxSeqLen int) error {
	seen := make(map[string]bool, len(t.Requests))
	last := 0
	for i, r := range t.Requests {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: request %d (%q): %s", ErrInvalidTrace, i, r.ID, fmt.Sprintf(format, args...))
		}
		switch {
		case r.ID == "" || seen[r.ID]:
			return bad("ids must be unique and not empty")
		case r.ArrivalStep < last:
			return bad("arrival_step %d before the previous request's %d: requests must be in arrival order", r.ArrivalStep, last)
		case r.PromptTokens < 1 || r.OutputTokens < 1:
			return bad("prompt_tokens %d and output_tokens %d must be ≥ 1", r.PromptTokens, r.OutputTokens)
		case r.PrefixTokens < 0 || r.PrefixTokens > r.PromptTokens || (r.PrefixTokens > 0) != (r.Prefix != ""):
			return bad("prefix_tokens %d must be in [0, prompt_tokens %d], and > 0 exactly when prefix is named", r.PrefixTokens, r.PromptTokens)
		case r.PromptTokens+r.OutputTokens > maxSeqLen:
			return bad("prompt_tokens + output_tokens = %d > max_seq_len %d", r.PromptTokens+r.OutputTokens, maxSeqLen)
		}
		seen[r.ID] = true
		last = r.ArrivalStep
	}
	return nil
}

// Load reads a JSON trace ({"requests": [...]}, fields as Request's json
// tags; unknown fields refused) of at most 64 MiB. Errors: the file's, or
// one wrapping ErrInvalidTrace for JSON that is not a trace.
func Load(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, 64<<20))
	dec.DisallowUnknownFields()
	var t Trace
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidTrace, path, err)
	}
	return &t, nil
}

// GenerateOptions shape a synthetic trace; Generate documents the
// distributions.
type GenerateOptions struct {
	// Seed makes the trace; the same options give the same trace.
	Seed uint64
	// Requests is how many requests (≥ 1); ArrivalsPerStep their mean
	// arrival rate (> 0).
	Requests        int
	ArrivalsPerStep float64
	// MinPrompt, MaxPrompt bound the prompt lengths; MinOutput, MaxOutput
	// the output lengths (1 ≤ min ≤ max).
	MinPrompt, MaxPrompt int
	MinOutput, MaxOutput int
	// Prefixes is the number of shared prefixes (system prompts) and
	// PrefixShare the fraction of requests that start with one, in [0, 1];
	// PrefixTokens is each prefix's length (≤ MinPrompt).
	Prefixes     int
	PrefixShare  float64
	PrefixTokens int
}

// Generate makes a seeded synthetic trace: arrivals a Poisson process of
// ArrivalsPerStep per step (exponential gaps, rounded down to steps),
// prompt and output lengths uniform in their ranges, and PrefixShare of the
// requests starting with one of Prefixes shared prefixes of PrefixTokens,
// chosen uniformly. Errors wrap ErrInvalidTrace and name the option.
func Generate(o GenerateOptions) (*Trace, error) {
	switch {
	case o.Requests < 1 || o.ArrivalsPerStep <= 0:
		return nil, fmt.Errorf("%w: %d requests at %g per step: both must be > 0", ErrInvalidTrace, o.Requests, o.ArrivalsPerStep)
	case o.MinPrompt < 1 || o.MinPrompt > o.MaxPrompt || o.MinOutput < 1 || o.MinOutput > o.MaxOutput:
		return nil, fmt.Errorf("%w: prompt lengths [%d, %d], outputs [%d, %d]: need 1 ≤ min ≤ max", ErrInvalidTrace, o.MinPrompt, o.MaxPrompt, o.MinOutput, o.MaxOutput)
	case o.PrefixShare < 0 || o.PrefixShare > 1 || (o.PrefixShare > 0 && (o.Prefixes < 1 || o.PrefixTokens < 1 || o.PrefixTokens > o.MinPrompt)):
		return nil, fmt.Errorf("%w: %d prefixes of %d tokens for %g of the requests: need a share in [0, 1], and with a share, ≥ 1 prefix of 1 to %d (the shortest prompt) tokens", ErrInvalidTrace, o.Prefixes, o.PrefixTokens, o.PrefixShare, o.MinPrompt)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5e12a1))
	t := &Trace{Requests: make([]Request, o.Requests)}
	at := 0.0
	for i := range t.Requests {
		at += rng.ExpFloat64() / o.ArrivalsPerStep
		r := Request{
			ID:           fmt.Sprintf("r%d", i),
			ArrivalStep:  int(at),
			PromptTokens: o.MinPrompt + rng.IntN(o.MaxPrompt-o.MinPrompt+1),
			OutputTokens: o.MinOutput + rng.IntN(o.MaxOutput-o.MinOutput+1),
		}
		if rng.Float64() < o.PrefixShare {
			r.Prefix = fmt.Sprintf("p%d", rng.IntN(o.Prefixes))
			r.PrefixTokens = o.PrefixTokens
		}
		t.Requests[i] = r
	}
	return t, nil
}

// promptIDs is r's prompt token ids: the prefix's ids, then its own.
func (r *Request) promptIDs(vocab int32) []int32 {
	ids := make([]int32, r.PromptTokens)
	for i := range ids {
		if i < r.PrefixTokens {
			ids[i] = tokenID(r.Prefix, i, vocab)
		} else {
			ids[i] = tokenID(r.ID, i, vocab)
		}
	}
	return ids
}

// tokenID is a token id in [0, vocab) derived from a name and a position
// (FNV-1a of both).
func tokenID(name string, pos int, vocab int32) int32 {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	for range 4 {
		h = (h ^ uint32(pos&0xff)) * 16777619
		pos >>= 8
	}
	return int32(h % uint32(vocab))
}
