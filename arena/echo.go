package arena

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// echoRunes is the most runes of an input value an error or a note quotes
// (ConfigError.Value, an unknown model_type, an unknown torch_dtype).
const echoRunes = 64

// clip is s for an error or a note: whole when it has at most echoRunes
// runes, else its first echoRunes runes and "… (N bytes)", N being len(s).
// Invalid UTF-8 is replaced by U+FFFD.
func clip(s string) string { return clipPrefix(s, len(s)) }

// excerpt is raw JSON text for an error's Value, cut as clip cuts it,
// without copying more of raw than it keeps.
func excerpt(raw json.RawMessage) string {
	return clipPrefix(string(raw[:min(len(raw), echoRunes*utf8.UTFMax)]), len(raw))
}

// clipPrefix cuts prefix, the start of a value of total bytes, to echoRunes
// runes and says the total when anything was cut.
func clipPrefix(prefix string, total int) string {
	cut, n := len(prefix) < total, 0
	for i := range prefix {
		if n == echoRunes {
			prefix, cut = prefix[:i], true
			break
		}
		n++
	}
	prefix = strings.ToValidUTF8(prefix, "\uFFFD")
	if cut {
		return prefix + "… (" + strconv.Itoa(total) + " bytes)"
	}
	return prefix
}
