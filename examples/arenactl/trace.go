package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/trace"
)

// startTrace starts a Go execution trace (runtime/trace) written to path,
// and returns the function that stops it and closes the file. Errors: the
// file's, and trace.Start's (another trace is already running).
func startTrace(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		return nil, errors.Join(fmt.Errorf("--trace %s: %w", path, err), f.Close(), os.Remove(path))
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}
