//go:build cuda

package gpuworker_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
	"github.com/gpuarena/gpuarena/kernels"
)

// smallKernel is the benchmarks' kernel: residual_add_bf16 over 4096 BF16
// elements (16 blocks of 256 threads), a few microseconds on the GPU.
const smallKernelElems = 4096

// computeRig is a manager on CUDA device 0 with an arena built (a step
// needs one), the kernels loaded and a buffer for them; and the same
// kernel loaded on a CUDADirect.
type computeRig struct {
	m      *gpuarena.Manager
	fn     device.Function
	cfg    device.LaunchConfig
	args   []uint64
	direct *gpuworker.CUDADirect
	k      gpuworker.KernelHandle
}

func newComputeRig(b *testing.B) *computeRig {
	ctx := context.Background()
	m, err := gpuarena.New(gpuarena.WithBackend(gpuworker.BackendConfig{Kind: gpuworker.KindCUDA}), gpuarena.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := m.Close(); err != nil {
			b.Error(err)
		}
	})
	if _, err := m.BuildArena(ctx, testkit.SmallPlan("bench")); err != nil {
		b.Fatal(err)
	}
	mod, err := m.LoadModule(ctx, kernels.ModuleName, kernels.PTX)
	if err != nil {
		b.Fatal(err)
	}
	fn, err := mod.Function(kernels.ResidualAdd)
	if err != nil {
		b.Fatal(err)
	}
	a, err := m.Alloc(ctx, "bench", 2*smallKernelElems)
	if err != nil {
		b.Fatal(err)
	}
	r := &computeRig{m: m, fn: fn}
	r.cfg, r.args = kernels.ResidualAddLaunch(a.Ptr, a.Ptr, a.Ptr, smallKernelElems)

	if r.direct, err = gpuworker.NewCUDADirect(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := r.direct.Close(); err != nil {
			b.Error(err)
		}
	})
	// One context: the manager's buffer is the direct launches' too.
	r.direct.Run(func(c gpuworker.Compute) {
		var ks []gpuworker.KernelHandle
		var errs []error
		if _, ks, errs, err = c.LoadModule(kernels.PTX, gpuworker.FormatPTX, []string{kernels.ResidualAdd}); err == nil {
			r.k, err = ks[0], errs[0]
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// directLaunches makes n launches on the direct backend and waits for
// them; it returns the time until the last launch returned, or with sync
// until the wait returned.
func (r *computeRig) directLaunches(b *testing.B, n int, sync bool) time.Duration {
	var d time.Duration
	var err error
	cfg := r.cfg.Normalized()
	r.direct.Run(func(c gpuworker.Compute) {
		start := time.Now()
		for range n {
			if err = c.Launch(r.k, cfg, r.args, true); err != nil {
				return
			}
		}
		d = time.Since(start)
		err = c.Synchronize()
		if sync {
			d = time.Since(start)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkCUDALaunchOverhead is the cost of one launch from inside a
// forward step (device.Device.Launch: the step's checks, then the cgo
// call) against the same cgo call to cuLaunchKernel made directly on a
// locked thread, in the same run: rounds of 256 launches alternate
// between the two, timed from before the first launch to after the last
// returned (the wait for the GPU is outside the timed part, and 256 launches
// stay below the driver's queue, so neither side waits for the GPU). It
// reports direct-ns/launch, step-ns/launch and step/direct (the target is
// ≤ 1.05); ns/op counts both sides.
//
//	./gpuworker.test -test.run '^$' -test.bench CUDALaunchOverhead -test.benchtime 200000x
func BenchmarkCUDALaunchOverhead(b *testing.B) {
	r := newComputeRig(b)
	const round = 256
	var direct, step time.Duration
	var launches int
	ctx := context.Background()
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		direct += r.directLaunches(b, n, false)
		var d time.Duration
		_, err := r.m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
			start := time.Now()
			for range n {
				if err := dev.Launch(r.fn, r.cfg, r.args...); err != nil {
					return err
				}
			}
			d = time.Since(start)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		step += d
		launches += n
	}
	b.StopTimer()
	dn, sn := float64(direct.Nanoseconds())/float64(launches), float64(step.Nanoseconds())/float64(launches)
	b.ReportMetric(dn, "direct-ns/launch")
	b.ReportMetric(sn, "step-ns/launch")
	b.ReportMetric(sn/dn, "step/direct")
}

// decodeLaunches is a decode step's kernel count: 48 layers × 15 kernels.
const decodeLaunches = 48 * 15

// BenchmarkCUDADecodeStep is one decode-shaped step, 720 launches of the
// small kernel and the wait for them, per op: through Manager.Forward
// ("manager": the arena supervisor, the GPU actor, the step's checks, the
// wait at its end) against the same launches and wait made directly on a
// locked thread ("direct").
//
//	./gpuworker.test -test.run '^$' -test.bench CUDADecodeStep -test.benchtime 500x
func BenchmarkCUDADecodeStep(b *testing.B) {
	r := newComputeRig(b)
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			r.directLaunches(b, decodeLaunches, true)
		}
	})
	b.Run("manager", func(b *testing.B) {
		ctx := context.Background()
		for range b.N {
			_, err := r.m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
				for range decodeLaunches {
					if err := dev.Launch(r.fn, r.cfg, r.args...); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
