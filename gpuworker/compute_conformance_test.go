package gpuworker_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/kernels"
)

// runComputeConformance is the compute half of the conformance suite: the
// same module, launches and checks on every backend (hostsim here, cuda
// with -tags cuda on a GPU). Results are compared with the Go references
// of package kernels within their stated BF16 tolerance (exact on hostsim,
// whose kernels are the references).
func runComputeConformance(t *testing.T, factory gpuworker.BackendFactory) {
	ctx := context.Background()
	w := startWith(t, factory, gpuworker.WithoutBudget())
	const owner = "compute-conformance"
	m, err := w.LoadModule(ctx, kernels.ModuleName, kernels.PTX)
	if err != nil {
		t.Fatal(err)
	}
	rms, add := mustFunction(t, m, kernels.RMSNorm), mustFunction(t, m, kernels.ResidualAdd)

	t.Run("BadModule", func(t *testing.T) {
		bad := []byte(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry broken(\n.param .u64 p\n)\n{\n\tthis is not PTX;\n}\n")
		_, err := w.LoadModule(ctx, "bad", []byte("\x00\x01 neither PTX nor a cubin"))
		var ke *device.KernelError
		if !errors.Is(err, gpuworker.ErrBadModule) || !errors.As(err, &ke) || ke.Module != "bad" {
			t.Errorf("garbage image: got %v, want ErrBadModule naming the module", err)
		}
		// The driver compiles PTX when it loads it; the simulated device
		// only reads the .entry names, so it takes this one.
		if _, err := w.LoadModule(ctx, "broken", bad); err == nil {
			if err := w.UnloadModule(ctx, "broken"); err != nil {
				t.Error(err)
			}
		} else if !errors.Is(err, gpuworker.ErrBadModule) {
			t.Errorf("PTX that does not compile: got %v, want ErrBadModule", err)
		}
	})
	t.Run("MissingFunction", func(t *testing.T) {
		_, err := m.Function("no_such_kernel")
		var ke *device.KernelError
		if !errors.Is(err, gpuworker.ErrNoFunction) || !errors.As(err, &ke) || ke.Function != "no_such_kernel" || ke.Module != kernels.ModuleName {
			t.Errorf("got %v, want ErrNoFunction naming module and function", err)
		}
	})
	t.Run("LaunchConfigRefused", func(t *testing.T) {
		p := mustAlloc(t, w, owner, 4096)
		_, args := kernels.ResidualAddLaunch(p, p, p, 16)
		_, err := w.Forward(ctx, func(dev device.Device) error {
			return dev.Launch(add, device.LaunchConfig{Grid: device.Dim3{X: 1}, Block: device.Dim3{X: 2048}}, args...)
		})
		var ke *device.KernelError
		if !errors.Is(err, gpuworker.ErrLaunchConfig) || !errors.As(err, &ke) || ke.Function != kernels.ResidualAdd {
			t.Errorf("2048 threads per block: got %v, want ErrLaunchConfig naming the function", err)
		}
	})
	for _, offset := range []bool{true, false} {
		name := map[bool]string{true: "RMSNormOffsetWeight", false: "RMSNormPlainWeight"}[offset]
		t.Run(name, func(t *testing.T) { checkRMSNormAndAdd(t, w, rms, add, owner, offset) })
	}
	t.Run("AsyncCopiesAndEvents", func(t *testing.T) {
		const n = 1 << 20
		p := mustAlloc(t, w, owner, n)
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i * 7)
		}
		back := make([]byte, n)
		var gpu time.Duration
		_, err := w.Forward(ctx, func(dev device.Device) error {
			start, err := dev.RecordEvent()
			if err != nil {
				return err
			}
			if err := dev.CopyHtoDAsync(p, src); err != nil {
				return err
			}
			cfg, args := kernels.ResidualAddLaunch(p, p, p, n/2) // doubles every BF16 value
			if err := dev.Launch(add, cfg, args...); err != nil {
				return err
			}
			end, err := dev.RecordEvent()
			if err != nil {
				return err
			}
			if err := dev.CopyDtoHAsync(back, p); err != nil {
				return err
			}
			if gpu, err = dev.Elapsed(start, end); err != nil {
				return err
			}
			return dev.Synchronize()
		})
		if err != nil {
			t.Fatal(err)
		}
		want := bf16Values(src)
		kernels.ResidualAddBF16(want, want, want)
		if got := bf16Values(back); !equalBF16(got, want) {
			t.Fatal("copy, launch and copy back on the step stream: the result is not the reference's")
		}
		if gpu < 0 {
			t.Fatalf("elapsed between events = %v", gpu)
		}
	})
	t.Run("LeaveInFlight", func(t *testing.T) {
		const n = 4096
		p := mustAlloc(t, w, owner, 2*n)
		ones := make([]uint16, n)
		for i := range ones {
			ones[i] = kernels.F32ToBF16(1)
		}
		if err := w.CopyHtoD(ctx, p, bf16Bytes(ones)); err != nil {
			t.Fatal(err)
		}
		cfg, args := kernels.ResidualAddLaunch(p, p, p, n)
		for range 3 { // 1 → 2 → 4 → 8, each step queued behind the last
			_, err := w.Forward(ctx, func(dev device.Device) error {
				dev.LeaveInFlight()
				return dev.Launch(add, cfg, args...)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		back, err := w.CopyDtoH(ctx, p, 2*n) // waits for the work in flight
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range bf16Values(back) {
			if kernels.BF16ToF32(h) != 8 {
				t.Fatalf("element %d = %v after three doublings of 1, want 8", i, kernels.BF16ToF32(h))
			}
		}
	})
	var graph device.Graph
	t.Run("Graph", func(t *testing.T) { graph = runGraphConformance(t, w, rms, add, owner) })
	t.Run("Unload", func(t *testing.T) {
		if err := w.UnloadModule(ctx, kernels.ModuleName); err != nil {
			t.Fatal(err)
		}
		p := mustAlloc(t, w, owner, 64)
		cfg, args := kernels.ResidualAddLaunch(p, p, p, 16)
		_, err := w.Forward(ctx, func(dev device.Device) error { return dev.Launch(add, cfg, args...) })
		if !errors.Is(err, gpuworker.ErrNoModule) {
			t.Fatalf("launch after unload: got %v, want ErrNoModule", err)
		}
		if graph.Name != "" {
			checkGraphAfterUnload(t, w, graph)
		}
	})
	if _, _, err := w.FreeOwner(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("the worker is fatal after the suite: %v", err)
	}
}

// checkRMSNormAndAdd normalises rows of random BF16 activations with a
// random weight, adds the input back (the residual), in place and out of
// place, and compares both results with the references.
func checkRMSNormAndAdd(t *testing.T, w *gpuworker.Worker, rms, add device.Function, owner string, offset bool) {
	const rows, cols, eps = 7, 2048, 1e-6
	rng := rand.New(rand.NewPCG(uint64(cols), map[bool]uint64{true: 1, false: 2}[offset]))
	x, wt := make([]uint16, rows*cols), make([]uint16, cols)
	for i := range x {
		x[i] = kernels.F32ToBF16(float32(rng.NormFloat64() * 4))
	}
	for i := range wt {
		wt[i] = kernels.F32ToBF16(float32(rng.NormFloat64() * 0.2))
	}
	bytes := int64(2 * rows * cols)
	xp, wp := mustAlloc(t, w, owner, bytes), mustAlloc(t, w, owner, 2*cols)
	outp, sump := mustAlloc(t, w, owner, bytes), mustAlloc(t, w, owner, bytes)
	ctx := context.Background()
	if err := w.CopyHtoD(ctx, xp, bf16Bytes(x)); err != nil {
		t.Fatal(err)
	}
	if err := w.CopyHtoD(ctx, wp, bf16Bytes(wt)); err != nil {
		t.Fatal(err)
	}
	inPlace := make([]byte, bytes)
	_, err := w.Forward(ctx, func(dev device.Device) error {
		cfg, args := kernels.RMSNormLaunch(outp, xp, wp, rows, cols, eps, offset)
		if err := dev.Launch(rms, cfg, args...); err != nil {
			return err
		}
		cfg, args = kernels.ResidualAddLaunch(sump, xp, outp, rows*cols)
		return dev.Launch(add, cfg, args...)
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.CopyDtoH(ctx, outp, bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := w.CopyDtoH(ctx, sump, bytes)
	if err != nil {
		t.Fatal(err)
	}
	wantOut := make([]uint16, rows*cols)
	kernels.RMSNormBF16(wantOut, x, wt, rows, cols, eps, offset)
	wantSum := make([]uint16, rows*cols)
	kernels.ResidualAddBF16(wantSum, x, bf16Values(out)) // the device's norm, added as the device did
	checkULPs(t, "rmsnorm_bf16", bf16Values(out), wantOut, kernels.RMSNormULPs(offset))
	checkULPs(t, "residual_add_bf16", bf16Values(sum), wantSum, kernels.ResidualAddULPs)

	// In place (out = x) on a fresh copy of x.
	if err := w.CopyHtoD(ctx, xp, bf16Bytes(x)); err != nil {
		t.Fatal(err)
	}
	_, err = w.Forward(ctx, func(dev device.Device) error {
		cfg, args := kernels.RMSNormLaunch(xp, xp, wp, rows, cols, eps, offset)
		if err := dev.Launch(rms, cfg, args...); err != nil {
			return err
		}
		return dev.CopyDtoHAsync(inPlace, xp)
	})
	if err != nil {
		t.Fatal(err)
	}
	checkULPs(t, "rmsnorm_bf16 in place", bf16Values(inPlace), wantOut, kernels.RMSNormULPs(offset))
}

// checkULPs fails when got is more than tol BF16 ulps from want anywhere,
// and logs how many elements differ at all.
func checkULPs(t *testing.T, what string, got, want []uint16, tol int) {
	t.Helper()
	worst, differ := 0, 0
	for i := range want {
		d := kernels.ULPs(got[i], want[i])
		if d > 0 {
			differ++
		}
		if d > worst {
			worst = d
		}
		if d > tol {
			t.Errorf("%s: element %d is %#04x (%v), the reference %#04x (%v): %d ulps, tolerance %d",
				what, i, got[i], kernels.BF16ToF32(got[i]), want[i], kernels.BF16ToF32(want[i]), d, tol)
			return
		}
	}
	t.Logf("%s: %d of %d elements differ from the reference, by at most %d BF16 ulps (tolerance %d)", what, differ, len(want), worst, tol)
}

func equalBF16(a, b []uint16) bool {
	for i := range a {
		if kernels.ULPs(a[i], b[i]) != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

func TestComputeConformanceHostSim(t *testing.T) {
	runComputeConformance(t, gpuworker.BackendConfig{Kind: gpuworker.KindHostSim}.Factory())
}
