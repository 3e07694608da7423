package gpuworker_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

var errStepBug = errors.New("step bug")

func panickingStep(device.Device) error { panic(errStepBug) }

// A step's panic comes back as a *StepPanicError carrying the stack where it
// panicked, and an error value stays testable with errors.Is.
func TestStepPanicKeepsItsValueAndStack(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	_, err := w.Forward(bounded(t), panickingStep)
	var pe *gpuworker.StepPanicError
	if !errors.As(err, &pe) || !errors.Is(err, gpuworker.ErrStepPanic) || !errors.Is(err, errStepBug) {
		t.Fatalf("forward of a panicking step: %v, want a *StepPanicError that is ErrStepPanic and the panic's error", err)
	}
	if !strings.Contains(string(pe.Stack), "panickingStep") {
		t.Fatalf("the panic's stack does not name the step:\n%s", pe.Stack)
	}
}
