package checkpoint

import (
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
)

// walker reads a JSON document (a header, an index) that json.Valid has
// accepted. encoding/json checks the syntax; the walker reads the structure
// in one pass without reflection, sees duplicate keys (json.Unmarshal keeps
// the last silently) and matches field names exactly (json.Unmarshal
// matches struct fields case-insensitively). It never indexes past the
// document: at the end peek returns 0 and every loop stops. Its errors are
// *Errors of kind kind naming file.
type walker struct {
	file string
	b    []byte
	i    int
	kind error    // ErrBadHeader or ErrBadIndex
	doc  string   // "header" or "index", for messages
	ints []uint64 // backing array uints hands out slices of
}

// newWalker checks that data is one JSON value (whitespace around it
// allowed) and returns a walker at its start, or the *Error of kind kind
// that says where the syntax breaks.
func newWalker(file string, data []byte, kind error, doc string) (*walker, error) {
	if !json.Valid(data) {
		var raw json.RawMessage
		err := json.Unmarshal(data, &raw)
		var se *json.SyntaxError
		at := int64(len(data))
		if errors.As(err, &se) {
			at = se.Offset
		}
		from := max(0, at-32)
		return nil, failCause(kind, file, "", "the "+doc+" is not valid JSON: it breaks at "+doc+" byte "+strconv.FormatInt(at, 10)+
			" (the text up to there ends "+strconv.Quote(string(data[from:min(at, int64(len(data)))]))+")", err)
	}
	return &walker{file: file, b: data, kind: kind, doc: doc}, nil
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (w *walker) peek() byte {
	for w.i < len(w.b) {
		switch c := w.b[w.i]; c {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return c
		}
	}
	return 0
}

// open consumes the '{' or '[' want, or fails with what the value is.
func (w *walker) open(want byte, tensor, what string) error {
	if w.peek() != want {
		kind := map[byte]string{'{': "an object", '[': "an array"}[want]
		return fail(w.kind, w.file, tensor, what+" is "+w.describe()+": it must be "+kind)
	}
	w.i++
	return nil
}

// next advances to the next member of the object or array whose closing
// byte is end; first says whether none was read yet. It returns false, the
// closing byte consumed, when there is none.
func (w *walker) next(end byte, first bool) bool {
	c := w.peek()
	if c == end || c == 0 {
		w.i++
		return false
	}
	if !first && c == ',' {
		w.i++
		w.peek()
	}
	return true
}

// key reads an object key and its ':'.
func (w *walker) key() string {
	k := w.str()
	if w.peek() == ':' {
		w.i++
	}
	return k
}

// isString reports whether the next value is a string.
func (w *walker) isString() bool { return w.peek() == '"' }

// isNull consumes a null and reports whether there was one.
func (w *walker) isNull() bool {
	if w.peek() == 'n' {
		w.skip()
		return true
	}
	return false
}

// str reads a string value. Without escapes it is one copy of the bytes;
// with them, encoding/json decodes it.
func (w *walker) str() string {
	raw, escaped := w.rawStr()
	if !escaped {
		return string(raw)
	}
	return unquote(raw)
}

// unquote decodes a quoted JSON string with escapes.
func unquote(quoted []byte) string {
	var out string
	_ = json.Unmarshal(quoted, &out) // valid: json.Valid accepted the document
	return out
}

// rawStr reads a string value and returns its bytes: the contents between
// the quotes when escaped is false, else the quoted JSON text, which
// json.Unmarshal decodes. The bytes alias the document: a caller that keeps
// them must copy them (str does).
func (w *walker) rawStr() (raw []byte, escaped bool) {
	if w.peek() != '"' {
		return nil, false
	}
	start := w.i
	for w.i++; w.i < len(w.b); w.i++ {
		switch w.b[w.i] {
		case '\\':
			escaped = true
			w.i++
		case '"':
			w.i++
			if escaped {
				return w.b[start:w.i], true
			}
			return w.b[start+1 : w.i-1], false
		}
	}
	return nil, false
}

// field reads an object key and its ':' like key, but returns "" for a key
// that differs from every one of names, without allocating: the walker
// reads tensor entries' fields this way.
func (w *walker) field(names ...string) string {
	raw, escaped := w.rawStr()
	if w.peek() == ':' {
		w.i++
	}
	if escaped {
		raw = []byte(unquote(raw))
	}
	for _, n := range names {
		if string(raw) == n {
			return n
		}
	}
	return ""
}

// number reads a number's text, "" when the next value is not a number.
func (w *walker) number() string {
	c := w.peek()
	if c != '-' && (c < '0' || c > '9') {
		return ""
	}
	start := w.i
	for w.i < len(w.b) && isNumberByte(w.b[w.i]) {
		w.i++
	}
	return string(w.b[start:w.i])
}

// isNumberByte reports whether c can be part of a JSON number.
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// skip consumes one value of any kind.
func (w *walker) skip() {
	switch c := w.peek(); c {
	case '"':
		w.str()
	case '{', '[':
		depth := 0
		for w.i < len(w.b) {
			switch w.b[w.i] {
			case '"':
				w.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			w.i++
			if depth == 0 {
				return
			}
		}
	default: // a number, true, false or null
		for w.i < len(w.b) {
			switch c := w.b[w.i]; c {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			w.i++
		}
	}
}

// describe names the next value's kind for an error ("a string", "the
// number 1.5", "null") without consuming it.
func (w *walker) describe() string {
	save := w.i
	defer func() { w.i = save }()
	switch c := w.peek(); {
	case c == '"':
		return "the string " + quote(w.str())
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == 0:
		return "missing"
	default:
		return "the number " + cut(w.number())
	}
}

// uint reads a number and returns its value when it is a non-negative
// integer below 2^64 written in digits only (JSON has no leading zeros), ok
// false otherwise ("-1", "1.0", "1e3", an overflow).
func (w *walker) uint() (v uint64, ok bool) {
	start := w.i
	ok = true
	for ; w.i < len(w.b) && isNumberByte(w.b[w.i]); w.i++ {
		c := w.b[w.i]
		if c < '0' || c > '9' {
			ok = false
			continue
		}
		hi, lo := bits.Mul64(v, 10)
		sum, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if hi != 0 || carry != 0 {
			ok = false
		}
		v = sum
	}
	return v, ok && w.i > start
}

// uints reads an array of non-negative integers; want is its required
// length, or -1 for any.
func (w *walker) uints(tensor, field string, want int) ([]uint64, error) {
	if err := w.open('[', tensor, field); err != nil {
		return nil, err
	}
	start := len(w.ints)
	for first := true; w.next(']', first); first = false {
		out := w.ints[start:]
		if want >= 0 && len(out) == want {
			return nil, fail(w.kind, w.file, tensor, field+" has more than "+strconv.Itoa(want)+" entries")
		}
		c := w.peek()
		if c != '-' && (c < '0' || c > '9') {
			return nil, fail(w.kind, w.file, tensor, field+"["+strconv.Itoa(len(out))+"] is "+w.describe()+
				": it must be a non-negative integer")
		}
		at := w.i
		v, ok := w.uint()
		if !ok {
			w.i = at
			return nil, fail(w.kind, w.file, tensor, field+"["+strconv.Itoa(len(out))+"] = "+cut(w.number())+
				": it must be a non-negative integer below 2^64")
		}
		w.ints = append(w.ints, v)
	}
	out := w.ints[start:len(w.ints):len(w.ints)]
	if want >= 0 && len(out) != want {
		return nil, fail(w.kind, w.file, tensor, field+" has "+strconv.Itoa(len(out))+" entries: it must have "+strconv.Itoa(want))
	}
	return out, nil
}
