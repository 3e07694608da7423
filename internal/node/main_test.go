package node

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs a node when the test binary is re-executed as one
// (nodeChildEnv set: see cluster_test.go), else the tests with goleak's
// check.
func TestMain(m *testing.M) {
	if os.Getenv(nodeChildEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
