package gpuarena_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/kernels"
)

// builtManager is a manager on the simulated device with Llama-3.1-8B's
// arena built and gpuarena's kernels loaded; it closes with the test.
func builtManager(t *testing.T, sim *gpuworker.HostSim) (*gpuarena.Manager, *device.Module) {
	t.Helper()
	ctx := context.Background()
	m, err := gpuarena.New(quiet, gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return sim, nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if _, err := m.BuildArena(ctx, llamaPlan(t)); err != nil {
		t.Fatal(err)
	}
	mod, err := m.LoadModule(ctx, kernels.ModuleName, kernels.PTX)
	if err != nil {
		t.Fatal(err)
	}
	return m, mod
}

func newSim(t *testing.T) *gpuworker.HostSim {
	t.Helper()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// TestModulesOutliveRelease: Release frees every byte and keeps the
// modules (code, not the arena's memory); UnloadModule takes one away.
func TestModulesOutliveRelease(t *testing.T) {
	ctx := context.Background()
	m, _ := builtManager(t, newSim(t))
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := m.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Counters.CurrentBytes != 0 || len(l.Modules) != 1 || l.Modules[0].Name != kernels.ModuleName {
		t.Fatalf("after Release: %d B, modules %+v; want 0 B and the module", l.Counters.CurrentBytes, l.Modules)
	}
	if err := m.UnloadModule(ctx, kernels.ModuleName); err != nil {
		t.Fatal(err)
	}
	if err := m.UnloadModule(ctx, kernels.ModuleName); !errors.Is(err, gpuarena.ErrNoModule) {
		t.Fatalf("second unload: got %v, want ErrNoModule", err)
	}
}

// TestLoadModuleFromStepIsReentrant: a step may use only its Device.
func TestLoadModuleFromStepIsReentrant(t *testing.T) {
	ctx := context.Background()
	m, _ := builtManager(t, newSim(t))
	_, err := m.Forward(ctx, func(*device.Arena, device.Device) error {
		_, err := m.LoadModule(ctx, "inner", kernels.PTX)
		return err
	})
	if !errors.Is(err, gpuarena.ErrReentrant) {
		t.Fatalf("LoadModule from a step: got %v, want ErrReentrant", err)
	}
}

// TestDeviceFaultClosesCleanly: a kernel that writes past its buffer
// makes the manager fatal; later requests get ErrDeviceFault, and Close
// returns with every byte of the simulated device given back.
func TestDeviceFaultClosesCleanly(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t)
	m, mod := builtManager(t, sim)
	add, err := mod.Function(kernels.ResidualAdd)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := m.Alloc(ctx, "small", 64)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
		cfg, args := kernels.ResidualAddLaunch(buf.Ptr, buf.Ptr, buf.Ptr, 1<<20)
		return dev.Launch(add, cfg, args...)
	})
	if !errors.Is(err, gpuarena.ErrDeviceFault) {
		t.Fatalf("faulting step: got %v, want ErrDeviceFault", err)
	}
	if !errors.Is(m.Err(), gpuarena.ErrDeviceFault) {
		t.Fatalf("Err = %v, want ErrDeviceFault", m.Err())
	}
	if _, err := m.Alloc(ctx, "after", 64); !errors.Is(err, gpuarena.ErrDeviceFault) {
		t.Fatalf("alloc after the fault: got %v", err)
	}
	if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); !errors.Is(err, gpuarena.ErrDeviceFault) {
		t.Fatalf("forward after the fault: got %v", err)
	}
	_ = m.Close() // the release it makes fails with the fault; it must return
	if sim.BytesInUse() != 0 {
		t.Fatalf("the simulated device holds %d B after Close", sim.BytesInUse())
	}
}
