package arena

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is the sentinel every config.json validation error wraps.
// Test with errors.Is; the detail (field, value, reason) is a *ConfigError.
var ErrInvalidConfig = errors.New("arena: invalid model config")

// ConfigError is a config.json field that is missing, malformed or
// inconsistent. It unwraps to ErrInvalidConfig (and to Err when set).
type ConfigError struct {
	// Field is the JSON field ("hidden_size", "quantization_config.fmt",
	// "layer_types[3]"); empty when the document as a whole is bad (empty
	// input, not a JSON object).
	Field string
	// Value is the offending value: an int64 for an integer that parsed, a
	// string for a string field or for raw JSON text that did not parse, nil
	// when the field is missing or null.
	Value any
	// Reason says what is wrong ("must be positive").
	Reason string
	// Err is the underlying cause (a JSON syntax error), or nil.
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
