//go:build cuda

package gpuworker

import (
	"errors"
	"fmt"
	"reflect"

	"gorgonia.org/cu"
)

// cudaErr translates a gorgonia.org/cu error (a CUresult) into this package's
// sentinels, once, at the backend boundary:
//
//	CUDA_ERROR_OUT_OF_MEMORY                        → ErrOutOfMemory
//	CUDA_ERROR_INVALID_VALUE                        → ErrInvalidValue
//	CUDA_ERROR_NO_DEVICE, CUDA_ERROR_INVALID_DEVICE → ErrNoDevice
//	CUDA_ERROR_ILLEGAL_ADDRESS and the other sticky
//	errors a faulting kernel leaves (isDeviceFault)  → ErrDeviceFault
//	anything else                                   → ErrDriver
//
// The result reads "<op>: <sentinel> (<cu's name> = CUresult <n>)", e.g.
// "cuMemAlloc(1099511627776 B): out of device memory (OutOfMemory = CUresult 2)",
// so errors.Is works on the sentinel and the driver's code is still there.
func cudaErr(op string, err error) error {
	sentinel := ErrDriver
	hint := ""
	switch {
	case errors.Is(err, cu.OutOfMemory):
		sentinel = ErrOutOfMemory
	case errors.Is(err, cu.InvalidValue):
		sentinel = ErrInvalidValue
	case errors.Is(err, cu.NoDevice), errors.Is(err, cu.InvalidDevice):
		sentinel = ErrNoDevice
	case isDeviceFault(err):
		sentinel = ErrDeviceFault
	case errors.Is(err, cu.InvalidContext):
		hint = ": no CUDA context is current on this thread (a call off the GPU actor's thread, or after Close?)"
	}
	return fmt.Errorf("%s: %w (%s)%s", op, sentinel, cudaResultText(err), hint)
}

// isInvalidValue reports whether err is CUDA_ERROR_INVALID_VALUE.
func isInvalidValue(err error) bool { return errors.Is(err, cu.InvalidValue) }

// cudaResultText renders a cu error with its numeric CUresult, which is what
// NVIDIA's documentation lists ("OutOfMemory = CUresult 2"). cu's result type
// is unexported; it is an int kind, read through reflect.
func cudaResultText(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if v := reflect.ValueOf(e); v.Kind() == reflect.Int && v.Type().PkgPath() == "gorgonia.org/cu" {
			if e == err {
				return fmt.Sprintf("%v = CUresult %d", e, v.Int())
			}
			return fmt.Sprintf("%v; %v = CUresult %d", err, e, v.Int())
		}
	}
	return err.Error()
}

// isDeviceFault reports whether err is one of the errors a faulting kernel
// leaves on the context for good: every later call of the process on it
// returns the same (CUDA driver API, "Error Handling").
func isDeviceFault(err error) bool {
	for _, r := range []error{cu.IllegalAddress, cu.MisalignedAddress, cu.IllegalInstruction,
		cu.InvalidAddressSpace, cu.InvalidPc, cu.HardwareStackError, cu.LaunchFailed,
		cu.Assert, cu.LaunchTimeout, cu.EccUncorrectable} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}
