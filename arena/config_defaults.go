package arena

import (
	"encoding/json"
	"fmt"
	"strings"
)

// classDefaults are the defaults of one transformers config class (its
// __init__ keyword defaults) for the fields a config.json may leave out:
// transformers fills them when it loads the config, so a config that
// omits one means the default. Multimodal configs lean on them: Gemma-3's
// text_config states no vocab_size or max_position_embeddings.
type classDefaults struct {
	// class and file are the config class and its transformers file
	// ("Gemma3TextConfig", "configuration_gemma3.py"), for the notes.
	class, file string
	// fields are the defaults in field order, each value as JSON.
	fields []fieldDefault
}

// fieldDefault is one field's default, as JSON.
type fieldDefault struct {
	name, value string
}

// fill sets every field of d that r's object lacks (absent or null) to
// its default, so that the family parses the config as transformers loads
// it, and returns one note naming the defaults taken; "" when none was.
func (d classDefaults) fill(r *fieldReader) string {
	var taken []string
	for _, f := range d.fields {
		if r.has(f.name) {
			continue
		}
		r.obj[f.name] = json.RawMessage(f.value)
		taken = append(taken, fmt.Sprintf("%s%s = %s", r.prefix, f.name, f.value))
	}
	if len(taken) == 0 {
		return ""
	}
	return fmt.Sprintf("taken from %s's defaults (%s), absent in the config: %s", d.class, d.file, strings.Join(taken, ", "))
}
