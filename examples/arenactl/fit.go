package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/arena"
)

const fitLong = `Fit checks, without touching a device, whether the plan fits on a device of
--device-memory bytes of which --device-used are already held by other
processes, under --gpu-memory-utilization (design.md §6):

  budget   = gpu_memory_utilization × device memory
  required = used by others + arena + slabs + the KV-cache blocks of one
             max_seq_len sequence
  fits     = required ≤ budget

What the arena and slabs leave of the budget goes to KV-cache blocks. When it
does not fit, the shortfall and the three largest buffers are shown.

Exit status: 0 when it fits, 1 when it does not, 2 on an error.`

// fitCmd holds the flags of "arenactl fit".
type fitCmd struct {
	app         *app
	plan        planFlags
	utilization float64
	memory      byteSize
	used        byteSize
	jsonOut     bool
}

// newFitCmd builds "arenactl fit".
func newFitCmd(a *app) *cobra.Command {
	c := &fitCmd{app: a}
	cmd := &cobra.Command{
		Use:   "fit --config FILE [flags]",
		Short: "Check whether the arena fits on a device (exit 1 when it does not)",
		Long:  fitLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return c.run(cmd.OutOrStdout()) },
	}
	fs := cmd.Flags()
	c.plan.register(fs, "")
	_ = cmd.MarkFlagRequired("config")
	addUtilizationFlag(fs, &c.utilization)
	addDeviceMemoryFlag(fs, &c.memory, "the device's total memory")
	fs.Var(&c.used, "device-used", "memory already used by other processes: bytes or a size")
	fs.BoolVar(&c.jsonOut, "json", false, "print the fit as JSON")
	return cmd
}

// run plans, fits and writes the report; it returns a negative answer
// (exit status 1) when the plan does not fit.
func (c *fitCmd) run(w io.Writer) error {
	cfg, plan, err := c.plan.plan()
	if err != nil {
		return err
	}
	if c.used > c.memory {
		return fmt.Errorf("--device-used %s is more than --device-memory %s", human(int64(c.used)), human(int64(c.memory)))
	}
	dev := arena.DeviceMemory{TotalBytes: int64(c.memory), FreeBytes: int64(c.memory - c.used)}
	r, err := arena.Fit(plan, cfg, dev, c.utilization)
	if err != nil {
		return withFlag(err)
	}
	c.app.logger.Info("fit", "model_type", plan.ModelType, "report", r)
	if c.jsonOut {
		err = writeJSON(w, fitToJSON(plan, r))
	} else {
		writeFitText(w, c.plan.config, plan, r)
	}
	if err != nil {
		return err
	}
	if !r.Fits {
		return negative(fmt.Errorf("%s does not fit: short by %s", plan.ModelType, bytesAndHuman(r.ShortfallBytes)))
	}
	return nil
}

// fitJSON is the --json form of a fit. All sizes are in bytes.
type fitJSON struct {
	ModelType            string       `json:"model_type"`
	Fits                 bool         `json:"fits"`
	GPUMemoryUtilization float64      `json:"gpu_memory_utilization"`
	DeviceTotalBytes     int64        `json:"device_total_bytes"`
	DeviceFreeBytes      int64        `json:"device_free_bytes"`
	BudgetBytes          int64        `json:"budget_bytes"`
	UsedByOthersBytes    int64        `json:"used_by_others_bytes"`
	ArenaBytes           int64        `json:"arena_bytes"`
	SlabBytes            int64        `json:"slab_bytes"`
	KVBlockSize          int64        `json:"kv_block_size"`
	KVBytesPerBlock      int64        `json:"kv_bytes_per_block"`
	MinKVBlocks          int64        `json:"min_kv_blocks"`
	KVBlocks             int64        `json:"kv_blocks"`
	KVCacheBytes         int64        `json:"kv_cache_bytes"`
	KVTokens             int64        `json:"kv_tokens"`
	RequiredBytes        int64        `json:"required_bytes"`
	HeadroomBytes        int64        `json:"headroom_bytes"`
	ShortfallBytes       int64        `json:"shortfall_bytes"`
	Largest              []bufferJSON `json:"largest"`
	Notes                []string     `json:"notes"`
}

// fitToJSON converts the report to its --json form.
func fitToJSON(p *arena.Plan, r *arena.FitReport) fitJSON {
	out := fitJSON{
		ModelType: p.ModelType, Fits: r.Fits, GPUMemoryUtilization: r.GPUMemoryUtilization,
		DeviceTotalBytes: r.Device.TotalBytes, DeviceFreeBytes: r.Device.FreeBytes,
		BudgetBytes: r.BudgetBytes, UsedByOthersBytes: r.UsedByOthersBytes,
		ArenaBytes: r.ArenaBytes, SlabBytes: r.SlabBytes,
		KVBlockSize: p.Options.KVBlockSize, KVBytesPerBlock: r.KVBytesPerBlock,
		MinKVBlocks: r.MinKVBlocks, KVBlocks: r.KVBlocks, KVCacheBytes: r.KVCacheBytes, KVTokens: r.KVTokens,
		RequiredBytes: r.RequiredBytes, HeadroomBytes: r.HeadroomBytes, ShortfallBytes: r.ShortfallBytes,
		Largest: []bufferJSON{}, Notes: nonNil(r.Notes),
	}
	for _, b := range r.Largest {
		out.Largest = append(out.Largest, bufferJSON{Name: b.ID.String(), DType: b.DType.String(), Shape: b.Shape, Bytes: b.Bytes})
	}
	return out
}

// writeFitText writes the fit as a readable report.
func writeFitText(w io.Writer, config string, p *arena.Plan, r *arena.FitReport) {
	verdict := "FITS"
	if !r.Fits {
		verdict = "DOES NOT FIT"
	}
	fmt.Fprintf(w, "%s: %s (%s)\n\n", verdict, p.ModelType, config)
	tw := newTable(w)
	row(tw, "device memory", bytesAndHuman(r.Device.TotalBytes))
	row(tw, "used by others", bytesAndHuman(r.UsedByOthersBytes))
	row(tw, "budget", fmt.Sprintf("%s = %g × device memory", bytesAndHuman(r.BudgetBytes), r.GPUMemoryUtilization))
	row(tw, "arena", bytesAndHuman(r.ArenaBytes))
	row(tw, "slabs", bytesAndHuman(r.SlabBytes))
	if r.KVBytesPerBlock > 0 {
		row(tw, "kv block", fmt.Sprintf("%s per block of %d tokens", bytesAndHuman(r.KVBytesPerBlock), p.Options.KVBlockSize))
		row(tw, "kv minimum", fmt.Sprintf("%d blocks (one sequence of max_seq_len %d) = %s",
			r.MinKVBlocks, p.Options.MaxSeqLen, bytesAndHuman(r.MinKVBlocks*r.KVBytesPerBlock)))
	}
	row(tw, "required", bytesAndHuman(r.RequiredBytes))
	if r.Fits {
		row(tw, "headroom", bytesAndHuman(r.HeadroomBytes))
	} else {
		row(tw, "shortfall", bytesAndHuman(r.ShortfallBytes))
	}
	if r.KVBytesPerBlock > 0 {
		row(tw, "kv cache", fmt.Sprintf("%d blocks = %d tokens = %s", r.KVBlocks, r.KVTokens, bytesAndHuman(r.KVCacheBytes)))
	}
	tw.Flush()
	if !r.Fits && len(r.Largest) > 0 {
		fmt.Fprintln(w, "\nlargest buffers:")
		tw = newTable(w)
		for _, b := range r.Largest {
			row(tw, " ", b.ID, b.DType, shapeString(b.Shape), human(b.Bytes))
		}
		tw.Flush()
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		writeNotes(w, r.Notes)
	}
}
