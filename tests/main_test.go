// Package tests holds gpuarena's integration tests: whole managers on the
// simulated device, every config in the repository, goroutine leaks.
package tests

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
