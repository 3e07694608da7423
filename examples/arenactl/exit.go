package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Exit statuses.
const (
	exitOK       = 0
	exitNegative = 1 // a check said no: fit does not fit, a run invariant failed
	exitFailure  = 2 // the command could not do its job
)

// statusError is an error that carries the process exit status.
type statusError struct {
	code int
	err  error
}

// Error is the wrapped error's message.
func (e *statusError) Error() string { return e.err.Error() }

// Unwrap returns the wrapped error.
func (e *statusError) Unwrap() error { return e.err }

// negative marks err as a negative answer (exit status 1), not a failure.
func negative(err error) error { return &statusError{code: exitNegative, err: err} }

// execute runs arenactl with args, writing output to stdout and logs and the
// error to stderr, and returns the exit status. The error is printed once,
// here, and nowhere else.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "arenactl: %v\n", err)
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	return exitFailure
}
