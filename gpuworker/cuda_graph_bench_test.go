//go:build cuda

package gpuworker_test

import (
	"context"
	"testing"

	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// BenchmarkCUDAGraphDecodeStep is one decode-shaped step per op, 720
// launches of the small kernel and the wait for them, made four ways on
// CUDA device 0: "direct" (cuLaunchKernel 720 times on a locked thread,
// then cuStreamSynchronize), "manager" (the same launches one by one
// inside Manager.Forward), "graph" (the 720 launches captured once by
// Manager.CaptureGraph, each op one Manager.Forward that replays them with
// cuGraphLaunch) and "direct-graph" (the same graph replay on the locked
// thread, without the manager). ns/op is the step's time, the wait
// included.
//
//	./gpuworker.test -test.run '^$' -test.bench CUDAGraphDecodeStep -test.benchtime 500x
func BenchmarkCUDAGraphDecodeStep(b *testing.B) {
	r := newComputeRig(b)
	ctx := context.Background()
	launches := func(dev device.Device) error {
		for range decodeLaunches {
			if err := dev.Launch(r.fn, r.cfg, r.args...); err != nil {
				return err
			}
		}
		return nil
	}
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			r.directLaunches(b, decodeLaunches, true)
		}
	})
	b.Run("manager", func(b *testing.B) {
		for range b.N {
			if _, err := r.m.Forward(ctx, func(_ *device.Arena, dev device.Device) error { return launches(dev) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	g, err := r.m.CaptureGraph(ctx, "decode-step", launches)
	if err != nil {
		b.Fatal(err)
	}
	if g.Launches != decodeLaunches {
		b.Fatalf("the graph holds %d launches, want %d", g.Launches, decodeLaunches)
	}
	b.Run("graph", func(b *testing.B) {
		for range b.N {
			if _, err := r.m.Forward(ctx, func(_ *device.Arena, dev device.Device) error { return dev.LaunchGraph(g) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	var h gpuworker.GraphHandle
	cfg := r.cfg.Normalized()
	r.direct.Run(func(c gpuworker.Compute) {
		if err = c.BeginCapture(); err != nil {
			return
		}
		for range decodeLaunches {
			if err = c.Launch(r.k, cfg, r.args, true); err != nil {
				_, _ = c.EndCapture(false)
				return
			}
		}
		h, err = c.EndCapture(true)
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("direct-graph", func(b *testing.B) {
		for range b.N {
			r.direct.Run(func(c gpuworker.Compute) {
				if err = c.LaunchGraph(h); err == nil {
					err = c.Synchronize()
				}
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
