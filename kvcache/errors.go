package kvcache

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is wrapped by every *ConfigError New returns.
var ErrInvalidConfig = errors.New("kvcache: invalid pool config")

// ConfigError is a GroupConfig field out of range. It unwraps to
// ErrInvalidConfig.
type ConfigError struct {
	// Group is the group's index in Config.Groups, −1 for the config as a
	// whole; Name is its name.
	Group int
	Name  string
	// Field is the GroupConfig field ("Blocks", "BlockSize", "Window").
	Field string
	// Value is the field's value (0 for Name).
	Value int
	// Reason says what the field must be.
	Reason string
}

// Error is `kvcache: group 1 "sliding_window": Window = 0: reason`.
func (e *ConfigError) Error() string {
	if e.Group < 0 {
		return fmt.Sprintf("kvcache: config %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("kvcache: group %d %q: %s = %d: %s", e.Group, e.Name, e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// ErrExhausted is wrapped by every *ExhaustedError.
var ErrExhausted = errors.New("kvcache: KV cache exhausted")

// ExhaustedError says that one request of a step needs more blocks (or
// state slots) in a group than the group can give now. Nothing of that
// request was allocated, so the scheduler can preempt a sequence (free it,
// to recompute later) and send the request again. It unwraps to
// ErrExhausted.
type ExhaustedError struct {
	// Op and Seq are the request: an admission, an append or a fork.
	Op  Op
	Seq SeqID
	// Group is the group's index in Config.Groups; Name and Kind its name
	// and kind.
	Group int
	Name  string
	Kind  Kind
	// Asked is what the request needs taken off the group's free queue:
	// new blocks, a copy-on-write block, and prefix-cache hits sitting
	// unused in the queue (they leave it too). State: one slot.
	Asked int
	// Free is the group's blocks holding nothing, Evictable its unused
	// blocks still holding cached prefixes; the request fits when Asked ≤
	// Free + Evictable.
	Free, Evictable int
}

// Error names the group, the request and the three numbers.
func (e *ExhaustedError) Error() string {
	unit := "blocks"
	if e.Kind == State {
		unit = "slots"
	}
	return fmt.Sprintf("kvcache: group %d %q: %s of sequence %d needs %d %s, %d free and %d evictable: free or preempt a sequence, or give the group more %s",
		e.Group, e.Name, e.Op, e.Seq, e.Asked, unit, e.Free, e.Evictable, unit)
}

// Unwrap returns ErrExhausted.
func (e *ExhaustedError) Unwrap() error { return ErrExhausted }

var (
	// ErrUnknownSequence: the request names a sequence the pool does not
	// hold (never admitted, or already freed).
	ErrUnknownSequence = errors.New("kvcache: unknown sequence")
	// ErrDuplicateSequence: an admission or a fork's child names a sequence
	// the pool already holds.
	ErrDuplicateSequence = errors.New("kvcache: sequence already exists")
	// ErrNoTokens: an admission without tokens, or an append with
	// neither tokens nor pending tokens.
	ErrNoTokens = errors.New("kvcache: request has no tokens")
	// ErrNegativePending: an append with Pending below 0.
	ErrNegativePending = errors.New("kvcache: append with a negative pending token count")
	// ErrPendingTokens: a fork of a sequence with pending tokens whose ids
	// no append has named yet; name them first.
	ErrPendingTokens = errors.New("kvcache: the sequence has pending tokens not yet named")
)

// SequenceError is a request refused for its sequence id or its tokens,
// before anything changed. It unwraps to ErrUnknownSequence,
// ErrDuplicateSequence, ErrNoTokens, ErrNegativePending or
// ErrPendingTokens.
type SequenceError struct {
	// Op and Seq are the request (a fork's Seq is the id at fault: the
	// unknown parent or the existing child).
	Op  Op
	Seq SeqID
	// Err is the sentinel.
	Err error
}

// Error is `kvcache: append of sequence 7: kvcache: unknown sequence`.
func (e *SequenceError) Error() string {
	return fmt.Sprintf("kvcache: %s of sequence %d: %v", e.Op, e.Seq, e.Err)
}

// Unwrap returns the sentinel.
func (e *SequenceError) Unwrap() error { return e.Err }

// ErrCacheInUse is wrapped by the *CacheInUseError ResetPrefixCache returns.
var ErrCacheInUse = errors.New("kvcache: prefix cache in use")

// CacheInUseError refuses a prefix-cache reset while a group has blocks in
// use (vLLM BlockPool.reset_prefix_cache returns False then). Free every
// sequence first.
type CacheInUseError struct {
	// Group is the first group with blocks in use; Name its name; Used
	// how many.
	Group int
	Name  string
	Used  int
}

// Error names the group and its blocks in use.
func (e *CacheInUseError) Error() string {
	return fmt.Sprintf("kvcache: reset prefix cache: group %d %q has %d blocks in use: free every sequence first", e.Group, e.Name, e.Used)
}

// Unwrap returns ErrCacheInUse.
func (e *CacheInUseError) Unwrap() error { return ErrCacheInUse }

// ErrTableLayout is wrapped by every *TableError.
var ErrTableLayout = errors.New("kvcache: block tables do not fit the layout")

// TableError is a batch whose block tables cannot be written in the
// layout asked: an unknown group, a batch of more sequences than rows, a
// table wider than the row, a destination too short. Nothing was written.
// It unwraps to ErrTableLayout and, for an unknown sequence, to
// ErrUnknownSequence.
type TableError struct {
	// Group is the group asked; Row the batch row at fault (−1 when the
	// fault is the layout's).
	Group, Row int
	// Seq is the row's sequence (when Row ≥ 0).
	Seq SeqID
	// Reason says what did not fit and what to change.
	Reason string
	// Err is ErrUnknownSequence for a sequence the pool does not hold.
	Err error
}

// Error says what did not fit.
func (e *TableError) Error() string {
	if e.Row < 0 {
		return fmt.Sprintf("kvcache: block tables of group %d: %s", e.Group, e.Reason)
	}
	return fmt.Sprintf("kvcache: block tables of group %d, row %d (sequence %d): %s", e.Group, e.Row, e.Seq, e.Reason)
}

// Unwrap returns ErrTableLayout and, when set, Err.
func (e *TableError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrTableLayout, e.Err}
	}
	return []error{ErrTableLayout}
}

// ErrInvariant is wrapped by the error Check returns.
var ErrInvariant = errors.New("kvcache: invariant broken")

// invariantf is Check's error: what is wrong, wrapping ErrInvariant.
func invariantf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
}
