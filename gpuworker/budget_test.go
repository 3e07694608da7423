package gpuworker_test

import (
	"errors"
	"math"
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// The budget check cannot be bypassed by a request whose size, added to
// what the ledger holds, would wrap past MaxInt64: the budget refuses it
// (OverBudget), not the device.
func TestBudgetCheckDoesNotOverflow(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{TotalBytes: 1 << 62}, gpuworker.WithGPUMemoryUtilization(1))
	if w.Budget() != 1<<62 {
		t.Fatalf("budget %d, want %d", w.Budget(), int64(1<<62))
	}
	mustAlloc(t, w, "user", 4096)
	_, err := w.Alloc(bounded(t), "user", "huge", math.MaxInt64-100)
	var oom *gpuworker.OutOfMemoryError
	if !errors.As(err, &oom) || !oom.OverBudget {
		t.Fatalf("alloc of MaxInt64−100 B with 4 KiB held: %v, want an *OutOfMemoryError from the budget (OverBudget)", err)
	}
}
