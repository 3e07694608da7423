package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/examples/internal/serving"
	"github.com/gpuarena/gpuarena/kvcache"
)

// defaultTrace is the serving trace run generates when --trace is not
// given: --requests requests arriving 4 per step, prompts of 32 to 1,024
// tokens, half of them starting with one of 4 shared 256-token prefixes,
// 8 to 128 generated tokens each.
func defaultTrace(requests int, seed uint64) serving.GenerateOptions {
	return serving.GenerateOptions{Seed: seed, Requests: requests, ArrivalsPerStep: 4,
		MinPrompt: 256, MaxPrompt: 1024, MinOutput: 8, MaxOutput: 128,
		Prefixes: 4, PrefixShare: 0.5, PrefixTokens: 256}
}

// serve builds the KV cache the fit left room for (or --kv-blocks of it)
// and serves the trace through it: each scheduler step is one KVStep
// through the manager's KV supervisor (a preemption costs one more), and
// each step's forward copies the batch's block tables into the arena's
// scratch buffer (block_tables of arena.DecodeMetaLayout), reads them back
// and compares them, and checks a window of the weights (--model). After
// every step the pool's invariants are checked (Manager.KVCheck). With
// --model each step also runs RMSNorm and the residual add on the device
// and checks them (run_compute.go). It fills
// rep's kv and serving fields; a failed check is recorded in rep.
func (c *runCmd) serve(ctx context.Context, m *gpuarena.Manager, cfg *arena.ModelConfig, plan *arena.Plan, a *device.Arena, probe *weightProbe, rep *runReport) error {
	if c.kvFit == nil {
		return fmt.Errorf("--kv: the fit for the KV cache failed (see the log)")
	}
	var req arena.KVCacheRequest
	if c.kvBlocks > 0 {
		req.Blocks = &c.kvBlocks
	}
	spec, err := arena.NewKVCacheSpec(cfg, c.kvFit, req)
	if err != nil {
		return fmt.Errorf("--kv: %w", err)
	}
	start := time.Now()
	if _, err := m.BuildKVCache(ctx, spec); err != nil {
		return fmt.Errorf("--kv: %w", err)
	}
	rep.KVBuildMS = ms(time.Since(start))
	rep.KVCacheBytes, rep.KVBlocks, rep.KVSeqs = spec.Bytes, spec.Counts.Blocks, spec.Seqs
	if rep.DeviceFreeKV, _, err = m.MemInfo(ctx); err != nil {
		return err
	}
	tr, err := c.loadTrace()
	if err != nil {
		return err
	}
	if probe != nil { // run_compute.go: each step also runs the kernels
		if probe.compute, err = newStepCompute(ctx, m, c.model, cfg, a, probe, rep); err != nil {
			return err
		}
	}
	o := plan.Options
	sched, err := serving.NewScheduler(tr, serving.Options{MaxBatchSize: int(o.MaxBatchSize), MaxBatchTokens: int(o.MaxBatchTokens), MaxSeqLen: int(o.MaxSeqLen), Vocab: int32(cfg.VocabSize)})
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	rep.Requests = len(tr.Requests)
	if err := fitsPool(tr, spec); err != nil {
		return err
	}
	meta := plan.DecodeMeta
	shape := kvcache.TableShape{Rows: int(meta.Rows), Width: int(meta.BlockTableWidth)}
	enc := make([]byte, meta.BlockTables.Bytes)
	back := make([]byte, meta.BlockTables.Bytes)
	wback, wwant := make([]byte, weightWindow), make([]byte, weightWindow)
	at := a.Ptrs[arena.Scratch] + device.DevicePtr(meta.BlockTables.Offset)
	var took []time.Duration
	inFlight := 0 // steps running now: the forward runs on the GPU thread, this goroutine waits for it
	begin := time.Now()
	for step := int64(0); !sched.Done(); step++ {
		t0 := time.Now()
		r, err := sched.Step(ctx, m)
		if err != nil {
			return err
		}
		if err := m.KVBlockTables(ctx, 0, shape, r.Batch, enc); err != nil {
			return err
		}
		if _, err := m.Forward(ctx, func(_ *device.Arena, dev device.Device) error {
			inFlight++
			defer func() { inFlight-- }()
			rep.MaxConcurrentForwards = max(rep.MaxConcurrentForwards, inFlight)
			if err := dev.CopyHtoD(at, enc); err != nil {
				return err
			}
			if err := dev.CopyDtoH(back, at); err != nil {
				return err
			}
			if !bytes.Equal(back, enc) {
				return checkFailed("step %d: block_tables read back from scratch differ from those written", step)
			}
			if probe != nil {
				return probe.check(step, dev, wback, wwant)
			}
			return nil
		}); err != nil {
			return err
		}
		took = append(took, time.Since(t0))
		if fullCheck(step, spec) {
			if err := m.KVCheck(ctx); err != nil {
				rep.failed(fmt.Sprintf("step %d: the block pool's invariants: %v", step, err))
				break
			}
		}
		for g, cn := range r.Counts {
			if cn.Free+cn.Cached+cn.Used != cn.Total {
				rep.failed(fmt.Sprintf("step %d: group %d: free %d + cached %d + used %d ≠ total %d", step, g, cn.Free, cn.Cached, cn.Used, cn.Total))
			}
		}
	}
	rep.StepsWallMS = ms(time.Since(begin))
	rep.Steps = len(took)
	if err := probe.finishCompute(); err != nil {
		return err
	}
	if err := m.KVCheck(ctx); err != nil {
		rep.failed(fmt.Sprintf("after the trace: the block pool's invariants: %v", err))
	}
	rep.setLatencies(took)
	st, err := m.KVStats(ctx)
	if err != nil {
		return err
	}
	ss := sched.Stats()
	if len(ss.PeakUsedBlocks) > 0 { // none when the trace is empty
		rep.KVPeakUsedBlocks = ss.PeakUsedBlocks[0]
	}
	rep.PrefixQueries, rep.PrefixHits, rep.PrefixHitTokens = st.Prefix.Queries, st.Prefix.Hits, st.Prefix.HitTokens
	rep.Preemptions, rep.SequencesFinished, rep.KVRoundTrips = ss.Preemptions, ss.Finished, ss.RoundTrips
	if st.Sequences != 0 {
		rep.failed(fmt.Sprintf("%d sequences still hold blocks after the trace", st.Sequences))
	}
	return nil
}

// fullCheckBlocks is the largest pool whose invariants serve checks after
// every step: Manager.KVCheck walks every block (175 ms for 16 million on
// the development machine), so a larger pool is checked after steps 1, 2,
// 4, 8, … and after the trace; the counts (free + cached + used = total)
// are checked after every step whatever the size.
const fullCheckBlocks = 1 << 18

// fullCheck reports whether serve checks the whole pool after step.
func fullCheck(step int64, spec *arena.KVCacheSpec) bool {
	return spec.Counts.Blocks+spec.Counts.SlidingBlocks <= fullCheckBlocks || step&(step+1) == 0
}

// fitsPool refuses a trace with a request the whole cache cannot hold
// (prompt and output, since a preempted request is computed again whole):
// it could never be admitted. Paged caches only; the pool reserves block 0.
func fitsPool(tr *serving.Trace, spec *arena.KVCacheSpec) error {
	usable, b := spec.Counts.Blocks-1, spec.BlockTokens
	if spec.Counts.Blocks == 0 || b == 0 {
		return nil
	}
	for _, r := range tr.Requests {
		if need := (int64(r.PromptTokens+r.OutputTokens) + b - 1) / b; need > usable {
			return fmt.Errorf("--kv: request %q needs %d blocks of %d tokens (%d prompt + %d output), the cache has %d usable: give --kv-blocks at least %d",
				r.ID, need, b, r.PromptTokens, r.OutputTokens, usable, need+1)
		}
	}
	return nil
}

// loadTrace reads --trace, or generates the default trace.
func (c *runCmd) loadTrace() (*serving.Trace, error) {
	if c.trace != "" {
		t, err := serving.Load(c.trace)
		if err != nil {
			return nil, fmt.Errorf("--trace: %w", err)
		}
		return t, nil
	}
	t, err := serving.Generate(defaultTrace(c.requests, 1))
	if err != nil {
		return nil, fmt.Errorf("--requests: %w", err)
	}
	return t, nil
}
