package gpuarena_test

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/kernels"
)

// A forward step that computes: load gpuarena's kernels once, then in each
// step normalise hidden_states into norm_output with RMSNorm (a unit
// weight: the zero-filled norm_unit_w with the offset-from-1 convention)
// and add the residual, timing the kernels with events. The same code runs
// on the simulated device (here) and on cuda.
func ExampleManager_LoadModule() {
	ctx := context.Background()
	cfg, plan, err := llamaPlanFor()
	if err != nil {
		panic(err)
	}
	m, err := gpuarena.New(quietLogs)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if _, err := m.BuildArena(ctx, plan); err != nil {
		panic(err)
	}
	mod, err := m.LoadModule(ctx, kernels.ModuleName, kernels.PTX)
	if err != nil {
		panic(err)
	}
	rms, _ := mod.Function(kernels.RMSNorm)
	add, _ := mod.Function(kernels.ResidualAdd)

	const rows = 4
	h := uint32(cfg.HiddenSize)
	row := make([]byte, 2*h)
	for i := range h {
		binary.LittleEndian.PutUint16(row[2*i:], kernels.F32ToBF16(3)) // every value 3
	}
	back := make([]byte, 2*h)
	_, err = m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		hs, norm, res := a.Ptr(arena.HiddenStates), a.Ptr(arena.NormOutput), a.Ptr(arena.Residual)
		for r := range rows {
			if err := dev.CopyHtoDAsync(hs+device.DevicePtr(r*len(row)), row); err != nil {
				return err
			}
		}
		start, err := dev.RecordEvent()
		if err != nil {
			return err
		}
		lc, args := kernels.RMSNormLaunch(norm, hs, a.Ptr(arena.NormUnitW), rows, h, 1e-5, true) // rms_norm_eps of Llama-3.1-8B's config.json
		if err := dev.Launch(rms, lc, args...); err != nil {
			return err
		}
		lc, args = kernels.ResidualAddLaunch(res, hs, norm, rows*uint64(h))
		if err := dev.Launch(add, lc, args...); err != nil {
			return err
		}
		end, err := dev.RecordEvent()
		if err != nil {
			return err
		}
		if _, err := dev.Elapsed(start, end); err != nil { // the kernels' device time
			return err
		}
		return dev.CopyDtoHAsync(back, res)
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("residual + rmsnorm(3) =", kernels.BF16ToF32(binary.LittleEndian.Uint16(back)))
	l, _ := m.Ledger(ctx)
	fmt.Println("modules:", l.Modules[0].Name, l.Modules[0].Functions, "kernels")
	// Output:
	// residual + rmsnorm(3) = 4
	// modules: gpuarena_kernels 2 kernels
}
