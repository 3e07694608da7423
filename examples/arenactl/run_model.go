package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
)

// weightWindow is how many bytes of a weight tensor each step of
// "run --model" reads back from the device and compares with the file.
const weightWindow = 4 << 10

// weightProbe is what the steps of "run --model" check of the loaded
// weights: step s reads a window of tensor s mod n back from the device and
// compares it with the same bytes read from the checkpoint (pread).
type weightProbe struct {
	ck      *checkpoint.Checkpoint
	tensors []device.WeightTensor // the non-empty ones
	// compute, when not nil, is the kernels each step also runs and
	// checks after the weight (run_compute.go).
	compute *stepCompute
}

// loadModel loads the weights of the model folder dir with load (which
// calls progress as the load goes), showing the load's progress on stderr
// (see loadProgress), records the load in rep, and returns the probe the
// steps check; close it when done.
func loadModel(ctx context.Context, load weightsLoader, dir string, stderr io.Writer, rep *runReport) (*weightProbe, error) {
	start := time.Now()
	w, err := load(ctx, newLoadProgress(stderr).report)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	d := time.Since(start)
	rep.WeightsBytes, rep.WeightsAllocatedBytes, rep.WeightsLoadMS = w.Bytes, w.AllocatedBytes, ms(d)
	rep.WeightsLoadGBps = float64(w.Bytes) / max(d.Seconds(), 1e-9) / 1e9
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	p := &weightProbe{ck: ck}
	for _, t := range w.Tensors {
		if t.Bytes > 0 {
			p.tensors = append(p.tensors, t)
		}
	}
	return p, nil
}

// weightsLoader loads a model's weights (all of them, or one rank's
// shard), calling progress as it goes.
type weightsLoader func(ctx context.Context, progress func(device.LoadProgress)) (*device.Weights, error)

// wholeModel is the weightsLoader of every tensor of the folder dir onto m.
func wholeModel(m *gpuarena.Manager, dir string) weightsLoader {
	return func(ctx context.Context, progress func(device.LoadProgress)) (*device.Weights, error) {
		return m.LoadWeights(ctx, dir, gpuarena.WithLoadProgress(progress))
	}
}

// close closes the checkpoint the probe reads.
func (p *weightProbe) close() error { return p.ck.Close() }

// check reads step s's window of a weight tensor from the device into back
// and from the file into want (both weightWindow bytes), and compares them.
func (p *weightProbe) check(s int64, dev device.Device, back, want []byte) error {
	if len(p.tensors) == 0 {
		return nil
	}
	t := p.tensors[s%int64(len(p.tensors))]
	win := min(int64(weightWindow), t.Bytes)
	off := (s * 4099) % (t.Bytes - win + 1)
	if err := dev.CopyDtoH(back[:win], t.Ptr+device.DevicePtr(off)); err != nil {
		return fmt.Errorf("step %d: read weight %s: %w", s, t.Name, err)
	}
	r, err := p.ck.Section(t.Name)
	if err != nil {
		return err
	}
	if _, err := r.ReadAt(want[:win], off); err != nil {
		return fmt.Errorf("step %d: read weight %s from the checkpoint: %w", s, t.Name, err)
	}
	if !bytes.Equal(back[:win], want[:win]) {
		return checkFailed("step %d: weight %s differs from the checkpoint at byte %d", s, t.Name, off+int64(firstDiff(back[:win], want[:win])))
	}
	if p.compute != nil {
		return p.compute.step(s, dev)
	}
	return nil
}
