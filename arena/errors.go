package arena

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is the sentinel every config.json validation error wraps.
// Test with errors.Is; the detail (field, value, reason) is a *ConfigError.
var ErrInvalidConfig = errors.New("arena: invalid model config")

// ErrConfigTooLarge is wrapped by the *ConfigError for a config past one of
// the reader's size limits: more than MaxConfigBytes of input, or an array
// field with more entries than its maximum (MaxLayers, MaxArchitectures,
// MaxArrayEntries), or a vocab_size past int32 token ids. Test with errors.Is.
var ErrConfigTooLarge = errors.New("arena: config exceeds a size limit")

// ErrNotRegularFile is wrapped by the *ConfigError LoadConfig returns for a
// path that is not a regular file after symlinks are followed: a directory
// without a config.json, a named pipe, a device (/dev/zero), a socket.
// LoadConfig refuses such a path before opening it, so it never blocks on a
// FIFO nor reads an endless device. Test with errors.Is.
var ErrNotRegularFile = errors.New("arena: config path is not a regular file")

// ErrUnsupportedMoE is wrapped by the *ConfigError for an unknown model_type
// whose config declares routed experts (n_routed_experts, num_local_experts,
// num_experts, moe_intermediate_size, ...): planned as dense it would leave
// the experts out of the weights, the buffers and the fit, and "fit" when
// it does not. Test with errors.Is.
var ErrUnsupportedMoE = errors.New("arena: unknown model_type with routed experts")

// ConfigError is a config.json field that is missing, malformed or
// inconsistent, or a config input the reader refuses (too large, not a
// regular file). It unwraps to ErrInvalidConfig (and to Err when set).
type ConfigError struct {
	// Field is the JSON field ("hidden_size", "quantization_config.fmt",
	// "layer_types[3]"); empty when the document as a whole is bad (empty
	// input, not a JSON object, more than MaxConfigBytes, not a regular file).
	Field string
	// Value is the offending value: an int64 for an integer that parsed (or
	// an array's entry count), a string for a string field or for raw JSON
	// text that did not parse, nil when the field is missing or null. A
	// string is cut to 64 runes followed by "… (N bytes)", N its full
	// length, so an error never echoes a megabyte of input.
	Value any
	// Reason says what is wrong ("must be positive"); any input it quotes
	// is cut the same way.
	Reason string
	// Err is the underlying cause (a JSON syntax error), one of
	// ErrConfigTooLarge, ErrNotRegularFile and ErrUnsupportedMoE, or nil.
	Err error
}

// Error is `arena: config field "F" = V: reason` (no value when missing).
func (e *ConfigError) Error() string {
	switch {
	case e.Field == "":
		return "arena: config: " + e.Reason
	case e.Value == nil:
		return fmt.Sprintf("arena: config field %q: %s", e.Field, e.Reason)
	default:
		return fmt.Sprintf("arena: config field %q = %v: %s", e.Field, e.Value, e.Reason)
	}
}

// Unwrap returns ErrInvalidConfig and, when set, the underlying cause.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// ErrInvalidOption is the sentinel every serving-option or device-argument
// validation error wraps. The detail is an *OptionError.
var ErrInvalidOption = errors.New("arena: invalid option")

// OptionError is a serving option (or a Fit argument) outside its range.
// It unwraps to ErrInvalidOption.
type OptionError struct {
	// Option is the option's snake_case name ("max_batch_tokens",
	// "gpu_memory_utilization", "free_bytes").
	Option string
	// Value is the value given (int64 or float64).
	Value any
	// Reason says what is wrong ("must be positive").
	Reason string
}

// Error is "arena: option NAME = V: reason".
func (e *OptionError) Error() string {
	return fmt.Sprintf("arena: option %s = %v: %s", e.Option, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidOption.
func (e *OptionError) Unwrap() error { return ErrInvalidOption }
