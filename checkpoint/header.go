package checkpoint

import (
	"strconv"
	"unicode/utf8"
)

// metadataKey is the header key reserved for the file's string-to-string
// metadata (the safetensors README, "Format").
const metadataKey = "__metadata__"

// headerTensor is one tensor entry of a header as written, before its place
// in the data area is checked against the others.
type headerTensor struct {
	name       string
	dtype      DType
	shape      []uint64
	begin, end uint64 // data_offsets, relative to the data area
	bytes      uint64 // shape × dtype size, equal to end − begin
}

// parsedHeader is what one file's header says.
type parsedHeader struct {
	tensors  []headerTensor // in header order
	metadata map[string]string
}

// parseHeader parses and checks the N header bytes of file: the format rules
// of the safetensors README ("Format" and its notes) and of the reference
// reader (safetensors/src/tensor.rs, SafeTensors::read_metadata and
// Metadata::validate):
//   - UTF-8 text that begins with '{' and is one JSON object, followed by
//     nothing but JSON whitespace (the writer pads with spaces);
//   - no key twice, in the header or in an entry (a duplicate tensor name is
//     ErrDuplicateTensor, anything else ErrBadHeader);
//   - __metadata__, when present and not null, an object of string values;
//   - every other key a tensor: an object with "dtype" (a known DType, else
//     ErrUnknownDType), "shape" (an array of non-negative integers) and
//     "data_offsets" (two non-negative integers, begin ≤ end); other fields
//     are ignored, as the reference reader ignores them;
//   - shape × dtype size = end − begin, overflow-checked (ErrShapeMismatch).
//
// Where the tensors lie relative to each other and to the data area is
// checkLayout's job. Every error is an *Error naming file and, where one is
// at fault, the tensor.
func parseHeader(file string, header []byte) (*parsedHeader, error) {
	if !utf8.Valid(header) {
		return nil, fail(ErrBadHeader, file, "", "the header is not UTF-8 text (the format requires a JSON UTF-8 string)")
	}
	if len(header) == 0 || header[0] != '{' {
		return nil, fail(ErrBadHeader, file, "", "the header does not begin with '{' (the format requires a JSON object starting at byte 8)")
	}
	w, err := newWalker(file, header, ErrBadHeader, "header")
	if err != nil {
		return nil, err
	}
	return w.header()
}

// header reads a header's top-level object.
func (w *walker) header() (*parsedHeader, error) {
	if err := w.open('{', "", "the header"); err != nil {
		return nil, err
	}
	guess := min(len(w.b)/96, 4096) // a tensor entry takes ~80–120 bytes
	h := &parsedHeader{tensors: make([]headerTensor, 0, guess)}
	seen := make(map[string]struct{}, guess)
	for first := true; w.next('}', first); first = false {
		key := w.key()
		if _, dup := seen[key]; dup {
			if key == metadataKey {
				return nil, fail(ErrBadHeader, w.file, "", "__metadata__ appears twice in the header")
			}
			return nil, fail(ErrDuplicateTensor, w.file, key, "the header lists this tensor twice (the format disallows duplicate keys)")
		}
		seen[key] = struct{}{}
		if key == metadataKey {
			var err error
			if h.metadata, err = w.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		t, err := w.tensor(key)
		if err != nil {
			return nil, err
		}
		h.tensors = append(h.tensors, t)
	}
	return h, nil
}

// metadata reads __metadata__: null, or an object of string values.
func (w *walker) metadata() (map[string]string, error) {
	if w.isNull() {
		return nil, nil
	}
	if err := w.open('{', "", "__metadata__"); err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for first := true; w.next('}', first); first = false {
		k := w.key()
		if _, dup := m[k]; dup {
			return nil, fail(ErrBadHeader, w.file, "", "__metadata__ has the key "+quote(k)+" twice")
		}
		if !w.isString() {
			return nil, fail(ErrBadHeader, w.file, "", "__metadata__["+quote(k)+"] is "+w.describe()+
				": every value must be a string (the format allows no other JSON there)")
		}
		m[k] = w.str()
	}
	return m, nil
}

// tensor reads one tensor entry and checks its own fields.
func (w *walker) tensor(name string) (headerTensor, error) {
	t := headerTensor{name: name}
	if err := w.open('{', name, "the tensor's entry"); err != nil {
		return t, err
	}
	var dtype DType
	var dtypeName []byte // the dtype's text when it is not a known DType
	var haveDType, haveShape, haveOffsets bool
	for first := true; w.next('}', first); first = false {
		field := w.field("dtype", "shape", "data_offsets")
		var have *bool
		switch field {
		case "dtype":
			have = &haveDType
		case "shape":
			have = &haveShape
		case "data_offsets":
			have = &haveOffsets
		default:
			w.skip()
			continue
		}
		if *have {
			return t, fail(ErrBadHeader, w.file, name, "the entry has the field \""+field+"\" twice")
		}
		*have = true
		var err error
		switch field {
		case "dtype":
			if !w.isString() {
				return t, fail(ErrBadHeader, w.file, name, "dtype is "+w.describe()+": it must be a string such as \"BF16\"")
			}
			raw, escaped := w.rawStr()
			if d, ok := ParseDType(string(raw)); ok && !escaped {
				dtype = d
			} else {
				dtypeName = raw
			}
		case "shape":
			t.shape, err = w.uints(name, "shape", -1)
		case "data_offsets":
			var offsets []uint64
			if offsets, err = w.uints(name, "data_offsets", 2); err == nil {
				t.begin, t.end = offsets[0], offsets[1]
			}
		}
		if err != nil {
			return t, err
		}
	}
	switch {
	case !haveDType:
		return t, fail(ErrBadHeader, w.file, name, "the entry has no dtype")
	case !haveShape:
		return t, fail(ErrBadHeader, w.file, name, "the entry has no shape")
	case !haveOffsets:
		return t, fail(ErrBadHeader, w.file, name, "the entry has no data_offsets")
	}
	d := dtype
	if !d.Valid() {
		return t, fail(ErrUnknownDType, w.file, name, "dtype "+quote(string(dtypeName))+" is not a safetensors dtype (known: BOOL, U8, I8, I16, U16, "+
			"I32, U32, I64, U64, F16, BF16, F32, F64, C64, F8_E4M3, F8_E5M2, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F4, F6_E2M3, F6_E3M2)")
	}
	t.dtype = d
	if t.begin > t.end {
		return t, fail(ErrBadHeader, w.file, name, "data_offsets ["+strconv.FormatUint(t.begin, 10)+", "+
			strconv.FormatUint(t.end, 10)+"] end before they begin")
	}
	n, reason, ok := tensorBytes(d, t.shape)
	if !ok {
		return t, fail(ErrShapeMismatch, w.file, name, reason)
	}
	if n != t.end-t.begin {
		return t, fail(ErrShapeMismatch, w.file, name, "shape "+formatShape(t.shape)+" of "+d.String()+" is "+
			strconv.FormatUint(n, 10)+" bytes but data_offsets ["+strconv.FormatUint(t.begin, 10)+", "+
			strconv.FormatUint(t.end, 10)+"] hold "+strconv.FormatUint(t.end-t.begin, 10)+
			": the header is wrong or the file was written by a broken writer")
	}
	t.bytes = n
	return t, nil
}
