package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/kernels"
)

// computeRows is how many rows of hidden_states each step of "run --model"
// normalises.
const computeRows = 4

// computeReport is what the steps' kernels did, in run's report (all
// empty without --model, or when the checkpoint has no BF16
// input_layernorm weight of layer 0: ComputeSkipped says why).
type computeReport struct {
	// ComputeNormWeight is the weight RMSNorm used, ComputeNormOffset
	// whether as an offset from 1, ComputeEps the config's rms_norm_eps.
	ComputeNormWeight string  `json:"compute_norm_weight,omitempty"`
	ComputeNormOffset bool    `json:"compute_norm_offset,omitempty"`
	ComputeEps        float32 `json:"compute_eps,omitempty"`
	// ComputeSteps is how many steps ran and checked the kernels;
	// ComputeMaxULPs the largest distance from the Go reference, in BF16
	// ulps, of any output (the tolerance is kernels.RMSNormULPs).
	ComputeSteps   int `json:"compute_steps,omitempty"`
	ComputeMaxULPs int `json:"compute_max_ulps"`
	// StepGPUP50US and StepGPUP99US are the kernels' device time per step
	// from events (cuEventElapsedTime), in µs, beside the steps' wall
	// times (step_p50_us, step_p99_us).
	StepGPUP50US   float64 `json:"step_gpu_p50_us,omitempty"`
	StepGPUP99US   float64 `json:"step_gpu_p99_us,omitempty"`
	ComputeSkipped string  `json:"compute_skipped,omitempty"`
	// ComputeCUDAGraphs: --cuda-graphs. The kernels are captured once
	// into a graph (Manager.CaptureGraph) and the steps alternate: even
	// steps launch them one by one, odd steps replay the graph
	// (Device.LaunchGraph), on the same rows, so both ways see the same
	// clocks and caches. Step GPU times above are then the even steps';
	// GraphSteps, GraphStepGPUP50US and GraphStepGPUP99US the odd steps'.
	// StepKernelsWallP50US (and p99) are the host's time per step from
	// before the first launch (or the replay) until the end event has
	// completed: the launch overhead and the kernels' run, without the
	// step's copies and checks; GraphStepKernelsWall* the same for the
	// replays.
	ComputeCUDAGraphs         bool    `json:"compute_cuda_graphs,omitempty"`
	StepKernelsWallP50US      float64 `json:"step_kernels_wall_p50_us,omitempty"`
	StepKernelsWallP99US      float64 `json:"step_kernels_wall_p99_us,omitempty"`
	GraphSteps                int     `json:"graph_steps,omitempty"`
	GraphStepGPUP50US         float64 `json:"graph_step_gpu_p50_us,omitempty"`
	GraphStepGPUP99US         float64 `json:"graph_step_gpu_p99_us,omitempty"`
	GraphStepKernelsWallP50US float64 `json:"graph_step_kernels_wall_p50_us,omitempty"`
	GraphStepKernelsWallP99US float64 `json:"graph_step_kernels_wall_p99_us,omitempty"`
}

// stepCompute is the compute each step of "run --model" does, after its
// copies and weight check: write computeRows rows of known BF16
// activations into hidden_states, RMSNorm them with layer 0's
// input_layernorm weight into norm_output, add them back into residual
// (residual = hidden_states + norm_output), read both back, compare them
// with package kernels' Go references within their BF16 tolerance, and
// put hidden_states' seed pattern back for the next step's copy check.
// Steps run one at a time on the GPU thread, so its buffers are never
// used by two at once. With --cuda-graphs the rows are the first ones in
// every step (a graph replays the pointers it was captured with), and odd
// steps replay the captured graph instead of launching.
type stepCompute struct {
	rms, add       device.Function
	hs, norm, res  device.DevicePtr
	weight         device.DevicePtr
	w              []uint16 // the weight, read from the checkpoint
	cols, maxRow   int64
	eps            float32
	offset         bool
	x, wantN, want []uint16
	in, normBack   []byte
	resBack, seed  []byte
	gpu, wall      []time.Duration
	graph          *device.Graph // --cuda-graphs: the kernels, captured
	graphGPU       []time.Duration
	graphWall      []time.Duration
	rep            *computeReport
	m              *gpuarena.Manager // unloads the module when the steps are done
}

// modelNormConfig is what run reads of config.json for the norm.
type modelNormConfig struct {
	ModelType  string   `json:"model_type"`
	RMSNormEps *float64 `json:"rms_norm_eps"`
	// TextConfig is a multimodal model's language model (Gemma 3).
	TextConfig *struct {
		RMSNormEps *float64 `json:"rms_norm_eps"`
	} `json:"text_config"`
}

// offsetNorm reports whether model_type stores its RMSNorm weights as an
// offset from 1 (Hugging Face's Qwen3NextRMSNorm and GemmaRMSNorm
// multiply by 1 + w; the others by w).
func offsetNorm(modelType string) bool {
	return modelType == "qwen3_next" || strings.HasPrefix(modelType, "gemma")
}

// newStepCompute loads gpuarena's kernels and finds the norm weight; it
// returns nil (and says why in rep) when the checkpoint has none to use.
func newStepCompute(ctx context.Context, m *gpuarena.Manager, dir string, cfg *arena.ModelConfig, a *device.Arena, p *weightProbe, rep *runReport) (*stepCompute, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	var nc modelNormConfig
	if err := json.Unmarshal(raw, &nc); err != nil {
		return nil, fmt.Errorf("--model: config.json: %w", err)
	}
	c := &stepCompute{cols: cfg.HiddenSize, eps: 1e-6, offset: offsetNorm(nc.ModelType), rep: &rep.computeReport, m: m}
	if nc.TextConfig != nil && nc.TextConfig.RMSNormEps != nil {
		c.eps = float32(*nc.TextConfig.RMSNormEps)
	}
	if nc.RMSNormEps != nil {
		c.eps = float32(*nc.RMSNormEps)
	}
	var wt *device.WeightTensor
	for i, t := range p.tensors {
		if strings.HasSuffix(t.Name, "layers.0.input_layernorm.weight") && t.DType == checkpoint.BF16 && t.Bytes == 2*c.cols {
			wt = &p.tensors[i]
			break
		}
	}
	if wt == nil {
		rep.ComputeSkipped = fmt.Sprintf("no BF16 [%d] layers.0.input_layernorm.weight in the checkpoint", c.cols)
		return nil, nil
	}
	c.weight = wt.Ptr
	wb := make([]byte, wt.Bytes)
	r, err := p.ck.Section(wt.Name)
	if err != nil {
		return nil, err
	}
	if _, err := r.ReadAt(wb, 0); err != nil {
		return nil, fmt.Errorf("--model: read %s: %w", wt.Name, err)
	}
	c.w = bf16s(wb)
	mod, err := m.LoadModule(ctx, kernels.ModuleName, kernels.PTX)
	if err != nil {
		return nil, err
	}
	if c.rms, err = mod.Function(kernels.RMSNorm); err != nil {
		return nil, err
	}
	if c.add, err = mod.Function(kernels.ResidualAdd); err != nil {
		return nil, err
	}
	c.hs, c.norm, c.res = a.Ptr(arena.HiddenStates), a.Ptr(arena.NormOutput), a.Ptr(arena.Residual)
	if c.norm == 0 || a.Bytes(arena.NormOutput) != a.Bytes(arena.HiddenStates) {
		return nil, fmt.Errorf("run: norm_output (%d B) is not hidden_states' size (%d B)", a.Bytes(arena.NormOutput), a.Bytes(arena.HiddenStates))
	}
	c.maxRow = a.Bytes(arena.HiddenStates) / (2 * c.cols)
	n := computeRows * c.cols
	c.x, c.wantN, c.want = make([]uint16, n), make([]uint16, n), make([]uint16, n)
	c.in, c.normBack, c.resBack, c.seed = make([]byte, 2*n), make([]byte, 2*n), make([]byte, 2*n), make([]byte, 2*n)
	c.rep.ComputeNormWeight, c.rep.ComputeNormOffset, c.rep.ComputeEps = wt.Name, c.offset, c.eps
	if c.rep.ComputeCUDAGraphs {
		g, err := m.CaptureGraph(ctx, stepGraphName, func(dev device.Device) error { return c.launch(dev, 0, min(computeRows, c.maxRow)) })
		if err != nil {
			return nil, errors.Join(err, m.UnloadModule(ctx, kernels.ModuleName))
		}
		c.graph = &g
	}
	return c, nil
}

// stepGraphName is the name of the graph --cuda-graphs captures.
const stepGraphName = "arenactl-step"

// launch launches RMSNorm and the residual add on rows rows from byte
// offset off of hidden_states, norm_output and residual.
func (c *stepCompute) launch(dev device.Device, off device.DevicePtr, rows int64) error {
	lc, args := kernels.RMSNormLaunch(c.norm+off, c.hs+off, c.weight, uint32(rows), uint32(c.cols), c.eps, c.offset)
	if err := dev.Launch(c.rms, lc, args...); err != nil {
		return err
	}
	lc, args = kernels.ResidualAddLaunch(c.res+off, c.hs+off, c.norm+off, uint64(rows*c.cols))
	return dev.Launch(c.add, lc, args...)
}

// step runs step s's kernels and checks them (see stepCompute).
func (c *stepCompute) step(s int64, dev device.Device) error {
	rows := min(computeRows, c.maxRow)
	row := (s * 7) % (c.maxRow - rows + 1)
	if c.graph != nil {
		row = 0
	}
	off := device.DevicePtr(2 * row * c.cols)
	replay := c.graph != nil && s%2 == 1
	n := rows * c.cols
	for i := range n {
		c.x[i] = kernels.F32ToBF16(float32((i*37+s*11)%97-48) / 16)
	}
	putBF16s(c.in[:2*n], c.x[:n])
	if err := dev.CopyHtoD(c.hs+off, c.in[:2*n]); err != nil {
		return fmt.Errorf("step %d: write hidden_states rows: %w", s, err)
	}
	began := time.Now()
	start, err := dev.RecordEvent()
	if err != nil {
		return err
	}
	if replay {
		err = dev.LaunchGraph(*c.graph)
	} else {
		err = c.launch(dev, off, rows)
	}
	if err != nil {
		return fmt.Errorf("step %d: %w", s, err)
	}
	end, err := dev.RecordEvent()
	if err != nil {
		return err
	}
	if err := dev.CopyDtoHAsync(c.normBack[:2*n], c.norm+off); err != nil {
		return fmt.Errorf("step %d: read norm_output: %w", s, err)
	}
	if err := dev.CopyDtoHAsync(c.resBack[:2*n], c.res+off); err != nil {
		return fmt.Errorf("step %d: read residual: %w", s, err)
	}
	gpu, err := dev.Elapsed(start, end)
	if err != nil {
		return err
	}
	if wall := time.Since(began); replay {
		c.graphGPU, c.graphWall = append(c.graphGPU, gpu), append(c.graphWall, wall)
	} else {
		c.gpu, c.wall = append(c.gpu, gpu), append(c.wall, wall)
	}
	for i := range c.seed[:2*n] {
		c.seed[i] = seedByte(int64(off) + int64(i))
	}
	if err := dev.CopyHtoD(c.hs+off, c.seed[:2*n]); err != nil {
		return fmt.Errorf("step %d: restore hidden_states rows: %w", s, err)
	}
	gotN := bf16s(c.normBack[:2*n])
	kernels.RMSNormBF16(c.wantN[:n], c.x[:n], c.w, int(rows), int(c.cols), c.eps, c.offset)
	if err := c.compare(s, "rmsnorm_bf16 → norm_output", gotN, c.wantN[:n], kernels.RMSNormULPs(c.offset)); err != nil {
		return err
	}
	kernels.ResidualAddBF16(c.want[:n], c.x[:n], gotN)
	if err := c.compare(s, "residual_add_bf16 → residual", bf16s(c.resBack[:2*n]), c.want[:n], kernels.ResidualAddULPs); err != nil {
		return err
	}
	c.rep.ComputeSteps++
	return nil
}

// compare fails the step when an output is more than tol BF16 ulps from
// the reference, and records the largest distance.
func (c *stepCompute) compare(s int64, what string, got, want []uint16, tol int) error {
	for i := range want {
		d := kernels.ULPs(got[i], want[i])
		c.rep.ComputeMaxULPs = max(c.rep.ComputeMaxULPs, d)
		if d > tol {
			return checkFailed("step %d: %s element %d is %v, the Go reference %v: %d BF16 ulps, tolerance %d",
				s, what, i, kernels.BF16ToF32(got[i]), kernels.BF16ToF32(want[i]), d, tol)
		}
	}
	return nil
}

// finish records the kernels' device and wall times per step, and with
// --cuda-graphs the replays' beside them.
func (c *stepCompute) finish() error {
	p := func(d []time.Duration) (p50, p99 float64) {
		s := sortedDurations(d)
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		return us(percentile(s, 0.50)), us(percentile(s, 0.99))
	}
	r := c.rep
	r.StepGPUP50US, r.StepGPUP99US = p(c.gpu)
	r.StepKernelsWallP50US, r.StepKernelsWallP99US = p(c.wall)
	ctx := context.Background()
	var err error
	if c.graph != nil {
		r.GraphSteps = len(c.graphGPU)
		if r.GraphSteps > 0 {
			r.GraphStepGPUP50US, r.GraphStepGPUP99US = p(c.graphGPU)
			r.GraphStepKernelsWallP50US, r.GraphStepKernelsWallP99US = p(c.graphWall)
		}
		err = c.m.DestroyGraph(ctx, c.graph.Name)
	}
	// The module's code is device memory the driver holds outside the
	// ledger: unloaded here, the device's free memory is back where it was
	// when run measures it after the release.
	return errors.Join(err, c.m.UnloadModule(ctx, kernels.ModuleName))
}

// computeText is the report's line for the kernels ("" without them).
func computeText(r *computeReport) string {
	switch {
	case r.ComputeSkipped != "":
		return "not run: " + r.ComputeSkipped
	case r.ComputeSteps == 0:
		return ""
	}
	line := fmt.Sprintf("rmsnorm_bf16 (%s, offset %v, eps %g) and residual_add_bf16 in %d steps, within %d BF16 ulps of the Go reference; GPU time per step p50 %.1f µs, p99 %.1f µs; kernels' wall p50 %.1f µs",
		r.ComputeNormWeight, r.ComputeNormOffset, r.ComputeEps, r.ComputeSteps, r.ComputeMaxULPs, r.StepGPUP50US, r.StepGPUP99US, r.StepKernelsWallP50US)
	if r.ComputeCUDAGraphs {
		line += fmt.Sprintf("; replayed as a CUDA graph in %d of them (odd steps): GPU p50 %.1f µs, p99 %.1f µs; kernels' wall p50 %.1f µs",
			r.GraphSteps, r.GraphStepGPUP50US, r.GraphStepGPUP99US, r.GraphStepKernelsWallP50US)
	}
	return line
}

// bf16s decodes little-endian BF16 values.
func bf16s(b []byte) []uint16 {
	v := make([]uint16, len(b)/2)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return v
}

// putBF16s encodes v little-endian into b.
func putBF16s(b []byte, v []uint16) {
	for i, h := range v {
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
}

// finishCompute records the kernels' device times when the steps ran them.
func (p *weightProbe) finishCompute() error {
	if p != nil && p.compute != nil {
		return p.compute.finish()
	}
	return nil
}
