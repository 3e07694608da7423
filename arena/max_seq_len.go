package arena

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// RopeScaling is one rope_scaling entry of a config.json (transformers v5:
// rope_parameters), as far as the longest sequence the model supports
// depends on it.
type RopeScaling struct {
	// Type is rope_type, or the older type ("yarn", "linear", "dynamic",
	// "llama3", "longrope", "default"); "su" reads as "longrope" and
	// "mrope" as "default", as transformers' patch_rope_scaling does.
	Type string
	// Factor is factor, the context extension; 0 when absent (vLLM then
	// keeps the factor of the entry before, or 1).
	Factor float64
	// OriginalMaxPositionEmbeddings is original_max_position_embeddings in
	// tokens, the context YaRN extends; 0 when absent.
	OriginalMaxPositionEmbeddings int64
}

// ropeTypesNotExtending are the rope types whose factor does not extend
// max_position_embeddings (vllm/config/model.py _get_and_verify_max_len:
// "su", "longrope" and "llama3" already state the extended length).
var ropeTypesNotExtending = []string{"su", "longrope", "llama3"}

// parseRopeScaling reads rope_scaling, else rope_parameters: one entry for
// the flat form ({"rope_type": "yarn", "factor": 4.0, ...}), one per layer
// type for transformers v5's nested form ({"full_attention": {...},
// "sliding_attention": {...}}, in key order). nil when both are absent.
// A factor that is not a positive finite number is a *ConfigError.
func parseRopeScaling(r *fieldReader) []RopeScaling {
	name := "rope_scaling"
	if !r.has(name) {
		name = "rope_parameters"
	}
	o := r.object(name)
	if o == nil {
		return nil
	}
	var out []RopeScaling
	if o.has("rope_type") || o.has("type") || o.has("factor") || o.has("rope_theta") {
		out = append(out, readRopeEntry(o))
	} else {
		keys := make([]string, 0, len(o.obj))
		for k := range o.obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if sub := o.object(k); sub != nil {
				out = append(out, readRopeEntry(sub))
				if sub.err != nil && o.err == nil {
					o.err = sub.err
				}
			}
		}
	}
	if o.err != nil && r.err == nil {
		r.err = o.err
	}
	return out
}

// readRopeEntry reads one rope_scaling object; problems go to o.
func readRopeEntry(o *fieldReader) RopeScaling {
	e := RopeScaling{Type: o.str("rope_type")}
	if e.Type == "" {
		e.Type = o.str("type")
	}
	switch e.Type {
	case "su":
		e.Type = "longrope"
	case "mrope":
		e.Type = "default"
	}
	if raw := o.raw("factor"); raw != nil {
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) || f <= 0 {
			o.fail("factor", excerpt(raw), "must be a positive number")
		} else {
			e.Factor = f
		}
	}
	e.OriginalMaxPositionEmbeddings = o.optional("original_max_position_embeddings", 0)
	return e
}

// MaxSeqLenLimit is the longest sequence, in tokens, the model's config
// supports, by vLLM's rule (vllm/config/model.py _get_and_verify_max_len):
// max_position_embeddings, scaled by rope_scaling's factor unless its
// rope_type is "su", "longrope" or "llama3" (their max_position_embeddings
// is already the extended length) or the model is a Gemma-3 (whose
// max_position_embeddings vLLM takes as already scaled); YaRN scales
// original_max_position_embeddings instead. source says how the limit was
// derived, for messages. 0 and "" when the config states no
// max_position_embeddings (nothing to check against).
func (c *ModelConfig) MaxSeqLenLimit() (limit int64, source string) {
	if c == nil {
		return 0, ""
	}
	base, source := c.MaxPositionEmbeddings, fmt.Sprintf("max_position_embeddings %d", c.MaxPositionEmbeddings)
	factor := 1.0
	if !strings.Contains(c.ModelType, "gemma3") {
		for _, e := range c.RopeScaling {
			if slices.Contains(ropeTypesNotExtending, e.Type) {
				continue
			}
			if e.Factor > 0 {
				factor = e.Factor
			}
			if e.Type == "yarn" && e.OriginalMaxPositionEmbeddings > 0 {
				base = e.OriginalMaxPositionEmbeddings
				source = fmt.Sprintf("rope_scaling yarn: original_max_position_embeddings %d", base)
			}
		}
	}
	if base <= 0 {
		return 0, ""
	}
	if factor == 1 {
		return base, source
	}
	derived := math.Floor(float64(base) * factor)
	source += fmt.Sprintf(" × rope_scaling factor %g", factor)
	if derived >= math.MaxInt64 {
		return math.MaxInt64, source
	}
	return max(int64(derived), 1), source
}

// ErrMaxSeqLenPastLimit is wrapped by the *MaxSeqLenError of a max_seq_len
// longer than the model supports. Test with errors.Is.
var ErrMaxSeqLenPastLimit = errors.New("arena: max_seq_len exceeds the model's limit")

// MaxSeqLenError is a max_seq_len above the model's limit
// (ModelConfig.MaxSeqLenLimit) without Options.AllowLongMaxSeqLen, refused
// as vLLM refuses a max_model_len above the derived one unless
// VLLM_ALLOW_LONG_MAX_MODEL_LEN is set. It unwraps to ErrInvalidOption and
// ErrMaxSeqLenPastLimit.
type MaxSeqLenError struct {
	// MaxSeqLen is the max_seq_len asked for, in tokens.
	MaxSeqLen int64
	// Limit is the model's limit in tokens; LimitSource says how it was
	// derived ("max_position_embeddings 40960").
	Limit       int64
	LimitSource string
}

// Error says what was asked, the limit and its source, and what to change.
func (e *MaxSeqLenError) Error() string {
	return fmt.Sprintf("arena: option max_seq_len = %d: exceeds the model's limit of %d tokens (%s); "+
		"lower max_seq_len to at most %d, or set allow_long_max_seq_len if the model really handles longer sequences "+
		"(positions past the limit give wrong outputs with RoPE and out-of-bounds reads with absolute positions)",
		e.MaxSeqLen, e.Limit, e.LimitSource, e.Limit)
}

// Unwrap returns ErrInvalidOption and ErrMaxSeqLenPastLimit.
func (e *MaxSeqLenError) Unwrap() []error { return []error{ErrInvalidOption, ErrMaxSeqLenPastLimit} }
