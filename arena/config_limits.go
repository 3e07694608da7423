package arena

import "fmt"

// MaxConfigBytes is the largest config.json ParseConfig and LoadConfig
// accept, in bytes: 4 MiB. A Hugging Face config.json is a few KiB (the
// largest in examples/configs, gpt-oss-120b.json, is under 2 KiB), so this
// leaves three orders of magnitude of room while bounding what a wrong
// path (a weights file, /dev/zero) or a hostile file can make the reader
// hold: ParseConfig keeps a small constant multiple of its input. A larger
// input is a *ConfigError wrapping ErrConfigTooLarge.
const MaxConfigBytes = 4 << 20

// MaxArchitectures is the most entries the architectures array may have
// (real configs list one class); more is a *ConfigError on "architectures"
// wrapping ErrConfigTooLarge, found before the entries are decoded.
const MaxArchitectures = 64

// MaxArrayEntries is the most entries any other array field may have
// (compress_ratios, mlp_only_layers, quantization_config.weight_block_size,
// quantization_config.modules_to_not_convert); more is a *ConfigError on
// that field wrapping ErrConfigTooLarge, found before the entries are
// decoded. layer_types is bounded by MaxLayers, and must then have
// num_hidden_layers entries.
const MaxArrayEntries = 1 << 16

// arrayLimit is the most entries an array field may have, and the name of
// the exported constant that says so, for the error message.
type arrayLimit struct {
	max  int
	name string
}

// The limits of the array fields.
var (
	layersLimit        = arrayLimit{MaxLayers, "MaxLayers"}
	architecturesLimit = arrayLimit{MaxArchitectures, "MaxArchitectures"}
	entriesLimit       = arrayLimit{MaxArrayEntries, "MaxArrayEntries"}
)

// tooLargeInput is the *ConfigError for an input of size bytes past
// MaxConfigBytes; exact false means only that more than MaxConfigBytes
// were seen (a read that stopped at the limit).
func tooLargeInput(size int64, exact bool) *ConfigError {
	seen := fmt.Sprintf("%d bytes", size)
	if !exact {
		seen = fmt.Sprintf("more than %d bytes", MaxConfigBytes)
	}
	return &ConfigError{
		Reason: fmt.Sprintf("input is %s, past the limit of %d bytes (%s, arena.MaxConfigBytes): "+
			"a Hugging Face config.json is a few KiB; pass the model's config.json, not a weights, tokenizer or other file",
			seen, MaxConfigBytes, HumanBytes(MaxConfigBytes)),
		Err: ErrConfigTooLarge,
	}
}

// arrayLen counts the entries of raw, a JSON array already validated by
// encoding/json, without decoding them: the commas at nesting depth 1
// outside strings, plus one unless the array is empty. It allocates
// nothing. It returns -1 when raw is not an array.
func arrayLen(raw []byte) int {
	if len(raw) == 0 || raw[0] != '[' {
		return -1
	}
	depth, commas, empty := 0, 0, true
	inString, escaped := false, false
	for _, b := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case ' ', '\t', '\n', '\r':
		case '[', '{':
			if depth == 1 {
				empty = false
			}
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				commas++
			}
		case '"':
			inString = true
			if depth == 1 {
				empty = false
			}
		default:
			if depth == 1 {
				empty = false
			}
		}
	}
	if empty {
		return 0
	}
	return commas + 1
}
