package arena

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// fieldReader reads typed fields out of one JSON object. The first problem is
// kept as a *ConfigError in err; every later read is a no-op returning zero,
// so a family parser reads its fields in order and checks err once.
type fieldReader struct {
	obj    map[string]json.RawMessage
	prefix string // "quantization_config." for a nested object
	err    error
}

// fail records the first error: field name, value and reason. A string
// value must already be cut (clip, excerpt).
func (r *fieldReader) fail(field string, value any, reason string) {
	r.failWith(field, value, reason, nil)
}

// failWith is fail with an underlying cause, such as ErrConfigTooLarge.
func (r *fieldReader) failWith(field string, value any, reason string, cause error) {
	if r.err == nil {
		r.err = &ConfigError{Field: r.prefix + field, Value: value, Reason: reason, Err: cause}
	}
}

// raw returns the field's JSON text, or nil when it is absent or null.
func (r *fieldReader) raw(name string) json.RawMessage {
	if r.err != nil {
		return nil
	}
	v, ok := r.obj[name]
	if !ok {
		return nil
	}
	v = bytes.TrimSpace(v)
	if string(v) == "null" {
		return nil
	}
	return v
}

// has reports whether the field is present and not null.
func (r *fieldReader) has(name string) bool { return r.raw(name) != nil }

// parseInt parses one JSON number as an int64. Integral floats ("128.0",
// "1e3") are accepted; fractions, strings and values past int64 are not.
func parseInt(raw json.RawMessage) (int64, string) {
	s := string(raw)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, "must be an integer"
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, ""
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, "overflows int64"
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) || (err == nil && (f >= math.MaxInt64 || f < math.MinInt64)):
		return 0, "overflows int64"
	case err != nil || f != math.Trunc(f):
		return 0, "must be an integer"
	}
	return int64(f), ""
}

// int returns the field as an int64; ok is false when it is absent or null.
func (r *fieldReader) int(name string) (v int64, ok bool) {
	raw := r.raw(name)
	if raw == nil {
		return 0, false
	}
	v, problem := parseInt(raw)
	if problem != "" {
		r.fail(name, excerpt(raw), problem)
		return 0, false
	}
	return v, true
}

// required returns a field that must be present and positive.
func (r *fieldReader) required(name string) int64 {
	v, ok := r.int(name)
	if !ok {
		if r.err == nil {
			r.fail(name, nil, "is required (missing or null)")
		}
		return 0
	}
	if v <= 0 {
		r.fail(name, v, "must be positive")
		return 0
	}
	return v
}

// optional returns a field that, when present, must be positive; def when absent.
func (r *fieldReader) optional(name string, def int64) int64 {
	v, ok := r.int(name)
	if !ok {
		return def
	}
	if v <= 0 {
		r.fail(name, v, "must be positive")
		return 0
	}
	return v
}

// nonNegative returns a field that, when present, must be ≥ 0; def when absent.
func (r *fieldReader) nonNegative(name string, def int64) int64 {
	v, ok := r.int(name)
	if !ok {
		return def
	}
	if v < 0 {
		r.fail(name, v, "must not be negative")
		return 0
	}
	return v
}

// str returns a string field, "" when absent or null.
func (r *fieldReader) str(name string) string {
	raw := r.raw(name)
	if raw == nil {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		r.fail(name, excerpt(raw), "must be a string")
	}
	return s
}

// bool returns a boolean field, false when absent or null.
func (r *fieldReader) bool(name string) bool {
	raw := r.raw(name)
	if raw == nil {
		return false
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		r.fail(name, excerpt(raw), "must be true or false")
	}
	return b
}

// elems returns the elements of an array field, nil when absent or null.
// An array of more than limit entries is refused (ErrConfigTooLarge) after
// counting them with arrayLen, before anything is decoded.
func (r *fieldReader) elems(name string, limit arrayLimit) []json.RawMessage {
	raw := r.raw(name)
	if raw == nil {
		return nil
	}
	n := arrayLen(raw)
	if n < 0 {
		r.fail(name, excerpt(raw), "must be an array")
		return nil
	}
	if n > limit.max {
		r.failWith(name, int64(n), fmt.Sprintf("has that many entries; the most arena accepts is %d (arena.%s)", limit.max, limit.name),
			ErrConfigTooLarge)
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		r.fail(name, excerpt(raw), "must be an array")
		return nil
	}
	return list
}

// strings returns an array-of-strings field of at most limit entries, nil
// when absent or null.
func (r *fieldReader) strings(name string, limit arrayLimit) []string {
	list := r.elems(name, limit)
	if list == nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		var s string
		if err := json.Unmarshal(e, &s); err != nil {
			r.fail(fmt.Sprintf("%s[%d]", name, i), excerpt(e), "must be a string")
			return nil
		}
		out = append(out, s)
	}
	return out
}

// ints returns an array-of-integers field of at most limit entries, nil
// when absent or null.
func (r *fieldReader) ints(name string, limit arrayLimit) []int64 {
	list := r.elems(name, limit)
	if list == nil {
		return nil
	}
	out := make([]int64, 0, len(list))
	for i, e := range list {
		v, problem := parseInt(bytes.TrimSpace(e))
		if problem != "" {
			r.fail(fmt.Sprintf("%s[%d]", name, i), excerpt(e), problem)
			return nil
		}
		out = append(out, v)
	}
	return out
}

// object returns a reader over a nested object field, or nil when absent.
func (r *fieldReader) object(name string) *fieldReader {
	raw := r.raw(name)
	if raw == nil {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		r.fail(name, excerpt(raw), "must be a JSON object")
		return nil
	}
	return &fieldReader{obj: obj, prefix: r.prefix + name + "."}
}
