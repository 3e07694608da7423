package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/examples/internal/memsvg"
)

// fitDeviceBar is the device's memory as the fit would leave it once the
// server is built: the weights, the arena and slabs, the KV cache (every
// block free: the fit's KVCacheBytes and StateCacheBytes), the reserve,
// the sampler pass inside the budget and the CUDA graphs the fit sizes
// (CUDAGraphBytes, inside the budget or outside it), memory used by
// others, and the rest free; a dashed line marks where the process budget ends
// (UsedByOthersBytes is drawn after the process's own memory, so the line
// stands at ProcessBudgetBytes). It is the bar the server's /debug/memory
// draws from its ledger, from the fit's numbers instead.
func fitDeviceBar(id, caption string, r *arena.FitReport) (memsvg.Bar, error) {
	return memsvg.DeviceBar(id, caption, r.Device.TotalBytes, map[string]int64{
		memsvg.Weights: r.WeightBytes,
		memsvg.Arena:   r.ArenaBytes + r.SlabBytes,
		memsvg.KVFree:  r.KVCacheBytes + r.StateCacheBytes,
		memsvg.Reserve: r.ReserveBytes + r.SamplerBudgetBytes + r.CUDAGraphBytes,
		memsvg.Others:  r.UsedByOthersBytes,
	}, memsvg.Marker{Bytes: r.ProcessBudgetBytes,
		Title: fmt.Sprintf("process budget: %s (gpu_memory_utilization %g, utilization scope %s)", arena.HumanBytes(r.ProcessBudgetBytes), r.GPUMemoryUtilization, r.UtilizationScope)})
}

// fitCaption is a device bar's caption: the verdict and the KV cache.
func fitCaption(prefix string, r *arena.FitReport) string {
	verdict := fmt.Sprintf("fits: %d KV blocks, %d sequences of %d tokens at once", r.KVBlocks, r.MaxConcurrentSeqs, r.MaxSeqLen)
	if !r.Fits {
		verdict = "does not fit: short by " + arena.HumanBytes(r.ShortfallBytes)
	}
	return fmt.Sprintf("%s%s on %s: %s", prefix, r.ModelType, arena.HumanBytes(r.Device.TotalBytes), verdict)
}

// writeFitSVG writes the picture of a one-device fit to path: the device
// bar and the arena's buffers. Errors: the file's, wrapped with --svg.
func writeFitSVG(path string, p *arena.Plan, r *arena.FitReport) error {
	dev, err := fitDeviceBar("device", fitCaption("", r), r)
	if err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	buffers := memsvg.ArenaBar("arena", fmt.Sprintf("the arena: %s in %d buffers and %d slabs", arena.HumanBytes(p.TotalBytes), presentBuffers(p), len(p.Slabs)), p)
	return writeSVGFile(path, "gpuarena fit: "+r.ModelType, dev, buffers)
}

// writeRanksFitSVG writes the picture of a parallel layout's fit to path:
// one device bar per rank. Errors: the file's, wrapped with --svg.
func writeRanksFitSVG(path string, r *arena.RankFitReport) error {
	var bars []memsvg.Bar
	for _, rk := range r.Ranks {
		b, err := fitDeviceBar(fmt.Sprintf("rank-%d", rk.Rank), fitCaption(fmt.Sprintf("rank %d (tp %d, pp %d, dp %d): ", rk.Rank, rk.TP, rk.PP, rk.DP), rk.Report), rk.Report)
		if err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
		bars = append(bars, b)
	}
	return writeSVGFile(path, fmt.Sprintf("gpuarena fit: %s on %s", r.ModelType, r.Layout), bars...)
}

// writePlanSVG writes the picture of a plan to path: the arena's buffers
// and slabs to scale. Errors: the file's, wrapped with --svg.
func writePlanSVG(path string, p *arena.Plan) error {
	b := memsvg.ArenaBar("arena", fmt.Sprintf("%s: the arena, %s in %d buffers and %d slabs", p.ModelType, arena.HumanBytes(p.TotalBytes), presentBuffers(p), len(p.Slabs)), p)
	return writeSVGFile(path, "gpuarena plan: "+p.ModelType, b)
}

// writeSVGFile writes bars as one standalone SVG file at path.
func writeSVGFile(path, title string, bars ...memsvg.Bar) error {
	var buf bytes.Buffer
	if err := memsvg.WriteDocument(&buf, title, bars...); err != nil {
		return fmt.Errorf("--svg %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	return nil
}

// presentBuffers is how many of p's buffers are present.
func presentBuffers(p *arena.Plan) int {
	n := 0
	for _, b := range p.Buffers {
		if b.Present() {
			n++
		}
	}
	return n
}
