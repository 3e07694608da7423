package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// rankRun is what run --rank builds on its one device: one rank of a
// tensor-parallel layout of the whole model.
type rankRun struct {
	layout arena.ParallelLayout
	rank   int64
	model  *arena.ModelConfig // the whole model's config
	plan   arena.RankPlan     // the rank's share: its config, arena, weights, KV layout
}

// rankReport is run --rank's part of the report: the rank's fit and what
// the device holds.
type rankReport struct {
	Layout string `json:"layout"`
	Rank   int64  `json:"rank"`
	// LayoutFits is arena.FitRanks' verdict on the whole layout with this
	// device on every rank; LayoutKVBlocks its KV blocks (the minimum over
	// the ranks, and over this rank's fit with its shard's exact sizes),
	// which the rank's KV cache takes.
	LayoutFits     bool  `json:"layout_fits"`
	LayoutKVBlocks int64 `json:"layout_kv_blocks"`
	// FitWeightBytes (the shard's tensors and their pool padding; 0
	// without --model, which loads none), FitArenaBytes (arena pool and
	// slabs) and FitKVBytes (the KV cache built) are arena.FitRank's, with
	// the shard's exact sizes; FitBytes their sum.
	FitWeightBytes int64 `json:"fit_weight_bytes"`
	FitArenaBytes  int64 `json:"fit_arena_bytes"`
	FitKVBytes     int64 `json:"fit_kv_bytes"`
	FitBytes       int64 `json:"fit_bytes"`
	// LedgerBytes is the ledger once weights, arena and KV cache are built;
	// PagedBytes its allocations (views left out) each rounded up to the
	// driver's 2 MiB page, what a real device gives them; DeviceDropBytes
	// what the device's free memory lost to them.
	LedgerBytes     int64 `json:"ledger_bytes"`
	PagedBytes      int64 `json:"paged_bytes"`
	DeviceDropBytes int64 `json:"device_drop_bytes"`
}

// rankSetup checks run --rank's flags and splits the model: rank's share
// of the --tensor-parallel-size layout (arena.PlanRanks). It returns nil
// when --rank is not given.
func (c *runCmd) rankSetup(cfg *arena.ModelConfig, changed func(string) bool) (*rankRun, error) {
	if !changed("rank") {
		return nil, nil
	}
	switch {
	case c.group.tensorParallel <= 1:
		return nil, errors.New("--rank: give the layout's --tensor-parallel-size (> 1)")
	case device.Layout(c.layout) != device.LayoutPooled:
		return nil, fmt.Errorf("--rank: checks the ledger against the rank's fit, which prices a pooled arena: leave --layout %s", device.LayoutPooled)
	}
	l := arena.ParallelLayout{TensorParallelSize: c.group.tensorParallel}
	if c.group.rank < 0 || c.group.rank >= l.GPUs() {
		return nil, fmt.Errorf("--rank %d: the layout %s has ranks 0 to %d", c.group.rank, l, l.GPUs()-1)
	}
	ranks, err := arena.PlanRanks(cfg, c.plan.opts, arena.WeightOptions{}, l)
	if err != nil {
		return nil, fmt.Errorf("--tensor-parallel-size: %w", err)
	}
	return &rankRun{layout: l, rank: c.group.rank, model: cfg, plan: ranks[c.group.rank]}, nil
}

// rankPreflight fits the layout with this device on every rank
// (arena.FitRanks: the verdict and the layout's KV blocks) and the rank
// with its shard's exact sizes (arena.FitRank), and sizes the KV cache
// from the latter with the layout's blocks. A fit that fails is logged.
func (c *runCmd) rankPreflight(dev arena.DeviceMemory, rep *runReport) {
	log := c.app.logger
	r := c.rank
	rep.Rank = &rankReport{Layout: r.layout.String(), Rank: r.rank}
	fo := arena.FitOptions{GPUMemoryUtilization: &c.utilization}
	all, err := arena.FitRanks(r.model, c.plan.opts, r.layout, []arena.DeviceMemory{dev}, fo)
	if err != nil {
		log.Warn("run: preflight fit of the layout failed", "err", err)
		return
	}
	rep.Rank.LayoutFits, rep.Rank.LayoutKVBlocks = all.Fits, all.KVBlocks
	f, err := arena.FitRank(r.model, c.plan.opts, r.layout, r.rank, dev, fo)
	if err != nil {
		log.Warn("run: preflight fit of the rank failed", "err", err)
		return
	}
	f.KVBlocks = min(f.KVBlocks, all.KVBlocks) // vLLM: one cache size for all ranks, the smallest
	rep.Rank.LayoutKVBlocks = f.KVBlocks       // this rank's exact sizes may hold a block less than the estimate
	c.kvFit = f
	rep.ArenaFits, rep.ModelFits, rep.ModelKVBlocks, rep.ModelShortfallBytes = f.Fits, all.Fits, f.KVBlocks, all.ShortfallBytes
	rep.ModelWeightBytes, rep.ModelWeightSource = f.WeightBytes, "the rank's shard (arena.FitRank)"
	rep.Rank.FitWeightBytes, rep.Rank.FitArenaBytes = f.WeightBytes, f.ArenaBytes+f.SlabBytes
	log.Info("run: preflight fit of the rank", "layout", r.layout.String(), "rank", r.rank, "layout_fits", all.Fits, "report", f)
}

// loadRank loads the rank's weight shard (Manager.LoadWeightsRank) and
// returns the probe the steps check: the tensors every rank holds whole,
// whose bytes on the device are the file's.
func (c *runCmd) loadRank(ctx context.Context, m *gpuarena.Manager, stderr io.Writer, rep *runReport) (*weightProbe, error) {
	r := c.rank
	load := func(ctx context.Context, progress func(device.LoadProgress)) (*device.Weights, error) { // a weightsLoader
		return m.LoadWeightsRank(ctx, c.model, r.layout, r.rank, arena.WeightOptions{}, gpuarena.WithLoadProgress(progress))
	}
	p, err := loadModel(ctx, load, c.model, stderr, rep)
	if err != nil {
		return nil, err
	}
	whole := p.tensors[:0]
	for _, t := range p.tensors {
		if ft, ok := p.ck.Tensor(t.Name); ok && ft.Bytes == t.Bytes {
			whole = append(whole, t)
		}
	}
	p.tensors = whole
	return p, nil
}

// checkRank records, once the KV cache is built, the ledger and the
// device's drop beside the rank's fit, and the invariants: the fit says
// the layout fits, the ledger is the fit to the byte, and the device lost
// the ledger's bytes: exactly on the simulated device; on a real one, its
// allocations rounded up to the driver's 2 MiB pages, within 2 MiB.
func (c *runCmd) checkRank(ctx context.Context, m *gpuarena.Manager, rep *runReport, simulated bool) error {
	rr := rep.Rank
	if rr == nil || c.kvFit == nil {
		return nil
	}
	led, err := m.Ledger(ctx)
	if err != nil {
		return err
	}
	rr.LedgerBytes = led.Counters.CurrentBytes
	for _, e := range led.Entries {
		if e.Parent == 0 { // an allocation, not a view inside one
			rr.PagedBytes += (e.Bytes + realDeviceSlackPerAllocation - 1) / realDeviceSlackPerAllocation * realDeviceSlackPerAllocation
		}
	}
	rr.DeviceDropBytes = rep.DeviceFreeBefore - rep.DeviceFreeKV
	if c.model == "" { // --config alone: the weights are priced, not loaded
		rr.FitWeightBytes = 0
	}
	blocks := c.kvFit.KVBlocks // the fit's, or what --kv-blocks asked instead
	if c.kvBlocks > 0 {
		blocks = c.kvBlocks
	}
	rr.FitKVBytes = blocks * c.kvFit.KVBytesPerBlock
	rr.FitBytes = rr.FitWeightBytes + rr.FitArenaBytes + rr.FitKVBytes
	if !rr.LayoutFits {
		rep.failed(fmt.Sprintf("the fit says layout %s does not fit this device on every rank", rr.Layout))
	}
	if rr.LedgerBytes != rr.FitBytes {
		rep.failed(fmt.Sprintf("rank %d: the ledger holds %d B, the rank's fit %d B (weights %d + arena %d + KV %d)",
			rr.Rank, rr.LedgerBytes, rr.FitBytes, rr.FitWeightBytes, rr.FitArenaBytes, rr.FitKVBytes))
	}
	switch d := rr.DeviceDropBytes - rr.PagedBytes; {
	case simulated && rr.DeviceDropBytes != rr.LedgerBytes:
		rep.failed(fmt.Sprintf("rank %d: the device lost %d B, the ledger holds %d B", rr.Rank, rr.DeviceDropBytes, rr.LedgerBytes))
	case !simulated && (d <= -realDeviceSlackPerAllocation || d >= realDeviceSlackPerAllocation):
		rep.failed(fmt.Sprintf("rank %d: the device lost %d B, %d B away from the ledger's allocations in 2 MiB pages (%d B)", rr.Rank, rr.DeviceDropBytes, d, rr.PagedBytes))
	}
	return nil
}
