package gpuworker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/kernels"
)

// bf16Bytes encodes BF16 values little-endian, as device memory holds them.
func bf16Bytes(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, h := range v {
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// bf16Values decodes little-endian BF16 values.
func bf16Values(b []byte) []uint16 {
	v := make([]uint16, len(b)/2)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return v
}

func mustLoad(t *testing.T, w *gpuworker.Worker, name string, image []byte) *device.Module {
	t.Helper()
	m, err := w.LoadModule(context.Background(), name, image)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustFunction(t *testing.T, m *device.Module, name string) device.Function {
	t.Helper()
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLoadModuleListsKernelsAndLedger(t *testing.T) {
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	m := mustLoad(t, w, "k", kernels.PTX)
	if m.Format != gpuworker.FormatPTX || m.ImageBytes != int64(len(kernels.PTX)) || len(m.Functions) != 2 {
		t.Fatalf("module = %+v", m)
	}
	rms := mustFunction(t, m, kernels.RMSNorm)
	if want := []int{8, 8, 8, 4, 4, 4}; !slices.Equal(rms.ParamBytes, want) {
		t.Fatalf("%s parameters %v, want %v", kernels.RMSNorm, rms.ParamBytes, want)
	}
	add := mustFunction(t, m, kernels.ResidualAdd)
	if want := []int{8, 8, 8, 8}; !slices.Equal(add.ParamBytes, want) {
		t.Fatalf("%s parameters %v, want %v", kernels.ResidualAdd, add.ParamBytes, want)
	}
	l, err := w.Ledger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Modules) != 1 || l.Modules[0].Name != "k" || l.Modules[0].Functions != 2 || l.Counters.CurrentBytes != 0 {
		t.Fatalf("ledger modules %+v, %d B", l.Modules, l.Counters.CurrentBytes)
	}
	if err := w.UnloadModule(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if l, _ = w.Ledger(context.Background()); len(l.Modules) != 0 {
		t.Fatalf("ledger modules after unload: %+v", l.Modules)
	}
}

func TestLoadModuleErrors(t *testing.T) {
	ctx := context.Background()
	reg := gpuworker.NewKernelRegistry()
	reg.Register(kernels.ResidualAdd, func(*gpuworker.HostLaunch) error { return nil })
	w, _ := startSim(t, gpuworker.HostSimConfig{Kernels: reg})
	for _, c := range []struct {
		name  string
		image []byte
		want  error
	}{
		{"garbage", []byte("not a module"), gpuworker.ErrBadModule},
		{"", kernels.PTX, gpuworker.ErrInvalidValue},
		{"fatbin", []byte{0x50, 0xed, 0x55, 0xba, 1, 0}, gpuworker.ErrBadModule},
		{"elf", []byte("\x7fELF garbage"), gpuworker.ErrBadModule},
	} {
		_, err := w.LoadModule(ctx, c.name, c.image)
		var ke *device.KernelError
		if !errors.Is(err, c.want) || !errors.As(err, &ke) || ke.Module != c.name {
			t.Errorf("load %q: got %v, want a *KernelError naming it with %v", c.name, err, c.want)
		}
	}
	m := mustLoad(t, w, "k", kernels.PTX)
	if _, err := w.LoadModule(ctx, "k", kernels.PTX); !errors.Is(err, gpuworker.ErrInvalidValue) {
		t.Errorf("second load under one name: got %v, want ErrInvalidValue", err)
	}
	// The registry has no rmsnorm_bf16: the module has it, hostsim cannot run it.
	_, err := m.Function(kernels.RMSNorm)
	var ke *device.KernelError
	if !errors.Is(err, gpuworker.ErrNoFunction) || !errors.As(err, &ke) || ke.Function != kernels.RMSNorm || ke.Module != "k" {
		t.Errorf("function without a Go kernel: got %v", err)
	}
	if _, err := m.Function("nope"); !errors.Is(err, gpuworker.ErrNoFunction) {
		t.Errorf("unknown function: got %v", err)
	}
	if err := w.UnloadModule(ctx, "nope"); !errors.Is(err, gpuworker.ErrNoModule) {
		t.Errorf("unload of an unknown module: got %v", err)
	}
}

// TestLaunchErrors: configurations the device refuses, argument counts,
// unloaded modules, events of another step, calls off the step.
func TestLaunchErrors(t *testing.T) {
	ctx := context.Background()
	w, _ := startSim(t, gpuworker.HostSimConfig{})
	m := mustLoad(t, w, "k", kernels.PTX)
	add := mustFunction(t, m, kernels.ResidualAdd)
	p := mustAlloc(t, w, "c", 4096)
	args := []uint64{device.PtrArg(p), device.PtrArg(p), device.PtrArg(p), 16}
	one := device.LaunchConfig{Grid: device.Dim3{X: 1}, Block: device.Dim3{X: 32}}
	var old device.Event
	var kept device.Device
	_, err := w.Forward(ctx, func(dev device.Device) error {
		for _, c := range []struct {
			what string
			cfg  device.LaunchConfig
			args []uint64
		}{
			{"2048 threads", device.LaunchConfig{Grid: device.Dim3{X: 1}, Block: device.Dim3{X: 2048}}, args},
			{"a zero grid", device.LaunchConfig{Block: device.Dim3{X: 32}}, args},
			{"1 MiB shared", device.LaunchConfig{Grid: device.Dim3{X: 1}, Block: device.Dim3{X: 32}, SharedBytes: 1 << 20}, args},
			{"3 arguments", one, args[:3]},
		} {
			err := dev.Launch(add, c.cfg, c.args...)
			var ke *device.KernelError
			if !errors.Is(err, gpuworker.ErrLaunchConfig) || !errors.As(err, &ke) || ke.Function != kernels.ResidualAdd || ke.Op != "launch" {
				t.Errorf("%s: got %v, want a launch *KernelError with ErrLaunchConfig", c.what, err)
			}
		}
		if err := dev.Launch(add, one, args...); err != nil {
			return err
		}
		var err error
		old, err = dev.RecordEvent()
		kept = dev
		// From another goroutine: refused before anything is read.
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := dev.Launch(add, one, args...); !errors.Is(err, gpuworker.ErrNotGPUThread) {
				t.Errorf("launch off the GPU thread: got %v", err)
			}
		})
		wg.Wait()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := kept.Launch(add, one, args...); !errors.Is(err, gpuworker.ErrStepOver) {
		t.Errorf("launch after the step: got %v, want ErrStepOver", err)
	}
	_, err = w.Forward(ctx, func(dev device.Device) error {
		now, err := dev.RecordEvent()
		if err != nil {
			return err
		}
		if _, err := dev.Elapsed(old, now); !errors.Is(err, gpuworker.ErrInvalidValue) {
			t.Errorf("an event of the last step: got %v, want ErrInvalidValue", err)
		}
		if d, err := dev.Elapsed(now, now); err != nil || d != 0 {
			t.Errorf("elapsed from an event to itself: %v, %v", d, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.UnloadModule(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	_, err = w.Forward(ctx, func(dev device.Device) error { return dev.Launch(add, one, args...) })
	if !errors.Is(err, gpuworker.ErrNoModule) {
		t.Errorf("launch of an unloaded module's function: got %v, want ErrNoModule", err)
	}
}

// TestDeviceFaultIsFatal: a kernel that writes outside its allocation
// faults the device; the step gets ErrDeviceFault, the worker turns fatal,
// later requests get the error, and Stop returns.
func TestDeviceFaultIsFatal(t *testing.T) {
	ctx := context.Background()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := gpuworker.Start(newSystem(t), func() (gpuworker.Backend, error) { return sim, nil }, gpuworker.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	m := mustLoad(t, w, "k", kernels.PTX)
	add := mustFunction(t, m, kernels.ResidualAdd)
	p := mustAlloc(t, w, "c", 4096)
	_, err = w.Forward(ctx, func(dev device.Device) error {
		cfg, args := kernels.ResidualAddLaunch(p, p, p, 4096) // 8 KiB of a 4 KiB allocation
		if err := dev.Launch(add, cfg, args...); !errors.Is(err, gpuworker.ErrDeviceFault) {
			t.Errorf("faulting launch: got %v, want ErrDeviceFault", err)
		}
		return dev.Memset(p, 0, 16)
	})
	if !errors.Is(err, gpuworker.ErrDeviceFault) {
		t.Fatalf("step after a fault: got %v, want ErrDeviceFault", err)
	}
	if !errors.Is(w.Err(), gpuworker.ErrDeviceFault) {
		t.Fatalf("Err = %v, want ErrDeviceFault", w.Err())
	}
	if _, err := w.Alloc(ctx, "o", "after", 16); !errors.Is(err, gpuworker.ErrDeviceFault) {
		t.Fatalf("alloc after a fault: got %v, want ErrDeviceFault", err)
	}
	if _, err := w.LoadModule(ctx, "k2", kernels.PTX); !errors.Is(err, gpuworker.ErrDeviceFault) {
		t.Fatalf("load after a fault: got %v, want ErrDeviceFault", err)
	}
	w.Stop()
	if sim.BytesInUse() != 0 {
		t.Fatalf("the simulated device holds %d B after Stop", sim.BytesInUse())
	}
}

// syncCounter is hostsim with its step-stream waits counted.
type syncCounter struct {
	*gpuworker.HostSim
	mu    sync.Mutex
	syncs int
}

func (s *syncCounter) Synchronize() error {
	s.mu.Lock()
	s.syncs++
	s.mu.Unlock()
	return s.HostSim.Synchronize()
}

func (s *syncCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncs
}

// TestStepStreamWaits: a step that launches is waited for at its end; one
// that leaves its work in flight is waited for by the next request that is
// not a forward step, not by the next step; a step that launches nothing
// is not waited for.
func TestStepStreamWaits(t *testing.T) {
	ctx := context.Background()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{})
	if err != nil {
		t.Fatal(err)
	}
	sc := &syncCounter{HostSim: sim}
	w := startWith(t, func() (gpuworker.Backend, error) { return sc, nil })
	m := mustLoad(t, w, "k", kernels.PTX)
	add := mustFunction(t, m, kernels.ResidualAdd)
	p := mustAlloc(t, w, "c", 4096)
	cfg, args := kernels.ResidualAddLaunch(p, p, p, 16)
	launch := func(leave bool) func(device.Device) error {
		return func(dev device.Device) error {
			if leave {
				dev.LeaveInFlight()
			}
			return dev.Launch(add, cfg, args...)
		}
	}
	steps := []struct {
		what string
		do   func() error
		want int
	}{
		{"a step that launches", func() error { _, err := w.Forward(ctx, launch(false)); return err }, 1},
		{"a step that launches nothing", func() error { _, err := w.Forward(ctx, func(device.Device) error { return nil }); return err }, 1},
		{"a step that leaves its work in flight", func() error { _, err := w.Forward(ctx, launch(true)); return err }, 1},
		{"the next step, leaving it too", func() error { _, err := w.Forward(ctx, launch(true)); return err }, 1},
		{"a ledger snapshot", func() error { _, err := w.Ledger(ctx); return err }, 2},
		{"another snapshot", func() error { _, err := w.Ledger(ctx); return err }, 2},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if got := sc.count(); got != s.want {
			t.Fatalf("after %s: %d waits for the step stream, want %d", s.what, got, s.want)
		}
	}
}

// TestComputeOnOneThread: loads, launches, events and waits run on the GPU
// thread, whichever goroutines ask.
func TestComputeOnOneThread(t *testing.T) {
	ctx := context.Background()
	w, sim := startSim(t, gpuworker.HostSimConfig{RecordThreads: true})
	m := mustLoad(t, w, "k", kernels.PTX)
	add := mustFunction(t, m, kernels.ResidualAdd)
	p := mustAlloc(t, w, "c", 4096)
	cfg, args := kernels.ResidualAddLaunch(p, p, p, 2048)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_, err := w.Forward(ctx, func(dev device.Device) error {
				if _, err := dev.RecordEvent(); err != nil {
					return err
				}
				return dev.Launch(add, cfg, args...)
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if th := sim.Threads(); len(th) != 1 {
		t.Fatalf("the device was called from %d threads: %v", len(th), th)
	}
}

// TestWithFaultsKeepsCompute: a fault plan wraps a backend's kernels as
// they are.
func TestWithFaultsKeepsCompute(t *testing.T) {
	w, _ := startFaulty(t, gpuworker.HostSimConfig{}, gpuworker.Faults{FailCopyAt: 100})
	if _, err := w.LoadModule(context.Background(), "k", kernels.PTX); err != nil {
		t.Fatalf("load through a fault plan: %v", err)
	}
}
