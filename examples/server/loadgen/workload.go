package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Mix is the requests' shape: each request's prompt and output lengths
// are drawn uniformly from their ranges, and a SharedFraction of the
// requests begin with one of SharedPrefixes prefixes of PrefixTokens
// tokens (what the server's prefix cache can hit), the rest with text of
// their own.
type Mix struct {
	// PromptTokens and OutputTokens are [min, max] in tokens; a prompt
	// token is one byte (the server's stand-in tokenizer), an output token
	// max_tokens' unit.
	PromptTokens, OutputTokens [2]int
	// SharedPrefixes is how many prefixes; PrefixTokens each one's length
	// in tokens, within PromptTokens[0]; SharedFraction in [0, 1].
	SharedPrefixes, PrefixTokens int
	SharedFraction               float64
}

// DefaultMix is a mix of short chat-like requests: prompts of 16 to 256
// tokens, outputs of 16 to 128, half of them behind one of 4 prefixes of
// 16 tokens.
var DefaultMix = Mix{PromptTokens: [2]int{16, 256}, OutputTokens: [2]int{16, 128}, SharedPrefixes: 4, PrefixTokens: 16, SharedFraction: 0.5}

// request is one request of the workload.
type request struct {
	prompt    string
	maxTokens int
}

// validate checks m's ranges; the prefixes' only while SharedFraction is
// above 0 (the workload draws none otherwise). Errors: a *ConfigError
// naming the first field that is wrong.
func (m Mix) validate() error {
	bad := func(field string, value any, want string) error {
		return &ConfigError{Field: "Mix." + field, Value: value, Want: want}
	}
	switch {
	case m.PromptTokens[0] < 1 || m.PromptTokens[1] < m.PromptTokens[0]:
		return bad("PromptTokens", m.PromptTokens, "must be min,max with 1 ≤ min ≤ max")
	case m.OutputTokens[0] < 1 || m.OutputTokens[1] < m.OutputTokens[0]:
		return bad("OutputTokens", m.OutputTokens, "must be min,max with 1 ≤ min ≤ max")
	case !(m.SharedFraction >= 0 && m.SharedFraction <= 1): // NaN too
		return bad("SharedFraction", m.SharedFraction, "must be in [0, 1]")
	case m.SharedFraction == 0:
		return nil
	case m.SharedPrefixes < 1:
		return bad("SharedPrefixes", m.SharedPrefixes, "must be at least 1 while a shared fraction is above 0")
	case m.PrefixTokens < 1 || m.PrefixTokens > m.PromptTokens[0]:
		return bad("PrefixTokens", m.PrefixTokens, fmt.Sprintf("must be 1 to %d, the shortest prompt, while a shared fraction is above 0", m.PromptTokens[0]))
	}
	return nil
}

// workload draws n requests of mix m (valid: validate) from a PCG seeded
// with seed: the same seed gives the same requests.
func workload(m Mix, n int, seed uint64) []request {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var prefixes []string
	if m.SharedFraction > 0 {
		prefixes = make([]string, m.SharedPrefixes)
	}
	for i := range prefixes {
		prefixes[i] = text(rng, m.PrefixTokens)
	}
	between := func(r [2]int) int { return r[0] + rng.IntN(r[1]-r[0]+1) }
	out := make([]request, n)
	for i := range out {
		length := between(m.PromptTokens)
		var b strings.Builder
		if len(prefixes) > 0 && rng.Float64() < m.SharedFraction {
			b.WriteString(prefixes[rng.IntN(len(prefixes))])
		}
		b.WriteString(text(rng, length-b.Len()))
		out[i] = request{prompt: b.String(), maxTokens: between(m.OutputTokens)}
	}
	return out
}

// text is n bytes of lower-case words.
func text(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		if rng.IntN(6) == 0 {
			b[i] = ' '
		} else {
			b[i] = byte('a' + rng.IntN(26))
		}
	}
	return string(b)
}
