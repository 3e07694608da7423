package kernels

import (
	"fmt"

	"github.com/gpuarena/gpuarena/gpuworker"
)

// hostRMSNorm runs RMSNormBF16 as the simulated device's rmsnorm_bf16:
// one row per block of the grid's x (as blockIdx.x picks the row on the
// GPU), every range checked against the device's allocations.
func hostRMSNorm(l *gpuworker.HostLaunch) error {
	if b := l.Config.Block; b.X%32 != 0 || b.Y != 1 || b.Z != 1 {
		return fmt.Errorf("%w: %s needs blocks of (32·k, 1, 1) threads, not %v", gpuworker.ErrLaunchConfig, RMSNorm, b)
	}
	rows, cols := int64(l.Config.Grid.X), int64(l.U32(3))
	out, err := l.BF16(l.Ptr(0), rows*cols)
	if err != nil {
		return err
	}
	x, err := l.BF16(l.Ptr(1), rows*cols)
	if err != nil {
		return err
	}
	w, err := l.BF16(l.Ptr(2), cols)
	if err != nil {
		return err
	}
	RMSNormBF16(out, x, w, int(rows), int(cols), l.F32(4), l.U32(5) != 0)
	return nil
}

// hostResidualAdd runs ResidualAddBF16 as the simulated device's
// residual_add_bf16.
func hostResidualAdd(l *gpuworker.HostLaunch) error {
	n := int64(l.U64(3)) // past MaxInt64: negative, which BF16 refuses
	out, err := l.BF16(l.Ptr(0), n)
	if err != nil {
		return err
	}
	a, err := l.BF16(l.Ptr(1), n)
	if err != nil {
		return err
	}
	b, err := l.BF16(l.Ptr(2), n)
	if err != nil {
		return err
	}
	ResidualAddBF16(out, a, b)
	return nil
}
