package checkpoint

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// encodeHeader writes the header of one file the way the reference writer
// does (safetensors/src/tensor.rs, prepare): compact JSON, __metadata__
// first (keys sorted), then the tensors in data order, the whole padded
// with spaces to a multiple of 8 bytes so the data area starts 8-aligned.
func encodeHeader(meta map[string]string, tensors []plannedTensor) []byte {
	b := make([]byte, 0, 64+96*len(tensors))
	b = append(b, '{')
	if len(meta) > 0 {
		b = appendJSONString(b, metadataKey)
		b = append(b, ":{"...)
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, meta[k])
		}
		b = append(b, '}')
	}
	for i, t := range tensors {
		if i > 0 || len(meta) > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, t.spec.Name)
		b = append(b, `:{"dtype":`...)
		b = appendJSONString(b, t.spec.DType.String())
		b = append(b, `,"shape":[`...)
		for k, d := range t.spec.Shape {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, t.begin, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, t.begin+t.bytes, 10)
		b = append(b, "]}"...)
	}
	b = append(b, '}')
	for len(b)%headerLenBytes != 0 {
		b = append(b, ' ')
	}
	return b
}

// appendJSONString appends s (valid UTF-8) as a JSON string, escaping as
// serde_json does: '"', '\\' and the control characters, nothing else.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRuneInString(s[i:])
			b = append(b, s[i:i+n]...)
			i += n
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}
