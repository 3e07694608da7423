package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/arena"
)

const planLong = `Plan sizes every intermediate buffer of one forward pass for the model in
--config under the serving options, touching no device.

The table has one row per present buffer (name, dtype, shape in elements,
bytes, human size), then the slabs and the total. Buffers the model does not
need are hidden; --all lists them too, with "—" for dtype, shape and size and
the reason in the last column. --svg FILE also writes the buffers and slabs
drawn to scale as a standalone SVG file.

--json prints {"model_type", "buffers": [{"name", "dtype", "shape", "bytes"}],
"slabs": [{"name", "bytes"}], "total_bytes", "notes", "options"}: present
buffers only, in allocation order, names as in the buffer table.`

// planCmd holds the flags of "arenactl plan".
type planCmd struct {
	app     *app
	plan    planFlags
	jsonOut bool
	listAll bool
	svg     string
}

// newPlanCmd builds "arenactl plan".
func newPlanCmd(a *app) *cobra.Command {
	c := &planCmd{app: a}
	cmd := &cobra.Command{
		Use:   "plan --config FILE [flags]",
		Short: "Size every buffer of the arena for a model and serving options",
		Long:  planLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return c.run(cmd.OutOrStdout(), cmd.Flags().Changed) },
	}
	c.plan.register(cmd.Flags(), "")
	_ = cmd.MarkFlagRequired("config")
	cmd.Flags().BoolVar(&c.jsonOut, "json", false, "print the plan as JSON")
	cmd.Flags().BoolVar(&c.listAll, "all", false, "also list the absent buffers and why (text output)")
	cmd.Flags().StringVar(&c.svg, "svg", "", "also write the arena's buffers drawn to scale as a standalone SVG file")
	return cmd
}

// run plans and writes the table or the JSON; changed reports whether a
// flag was given.
func (c *planCmd) run(w io.Writer, changed func(string) bool) error {
	_, plan, err := c.plan.plan(changed)
	if err != nil {
		return err
	}
	c.app.logger.Info("planned", "model_type", plan.ModelType, "total_bytes", plan.TotalBytes, "slabs", len(plan.Slabs))
	if c.svg != "" {
		if err := writePlanSVG(c.svg, plan); err != nil {
			return err
		}
	}
	if c.jsonOut {
		return writeJSON(w, planToJSON(plan))
	}
	writePlanText(w, c.plan.config, plan, c.listAll)
	return nil
}

// planJSON is the --json form of a plan. The field order is the output's.
type planJSON struct {
	ModelType  string       `json:"model_type"`
	Buffers    []bufferJSON `json:"buffers"`
	Slabs      []slabJSON   `json:"slabs"`
	TotalBytes int64        `json:"total_bytes"`
	Notes      []string     `json:"notes"`
	Options    optionsJSON  `json:"options"`
}

// bufferJSON is one present buffer in the JSON outputs.
type bufferJSON struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
	Bytes int64   `json:"bytes"`
}

// slabJSON is one slab in the JSON outputs.
type slabJSON struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// optionsJSON is arena.Options as resolved by PlanFor, in snake_case.
type optionsJSON struct {
	MaxBatchTokens int64 `json:"max_batch_tokens"`
	MaxSeqLen      int64 `json:"max_seq_len"`
	KVBlockSize    int64 `json:"kv_block_size"`
	MaxBatchSize   int64 `json:"max_batch_size"`
	KMax           int64 `json:"k_max"`
	LoRAMaxRank    int64 `json:"lora_max_rank"`
	FP8Rowwise     bool  `json:"fp8_rowwise"`
	Q2Prefill      bool  `json:"q2_prefill"`
	// LogitsRows, KVCacheDType and MambaSSMCacheDType are as resolved
	// ("all", "auto", "bfloat16", ...); AllowLongMaxSeqLen as given.
	LogitsRows         string `json:"logits_rows"`
	KVCacheDType       string `json:"kv_cache_dtype"`
	MambaSSMCacheDType string `json:"mamba_ssm_cache_dtype"`
	AllowLongMaxSeqLen bool   `json:"allow_long_max_seq_len"`
}

// optionsToJSON converts resolved options to their JSON form.
func optionsToJSON(o arena.Options) optionsJSON {
	return optionsJSON{
		MaxBatchTokens: o.MaxBatchTokens, MaxSeqLen: o.MaxSeqLen, KVBlockSize: o.KVBlockSize,
		MaxBatchSize: o.MaxBatchSize, KMax: *o.KMax, LoRAMaxRank: o.LoRAMaxRank,
		FP8Rowwise: o.FP8Rowwise, Q2Prefill: o.Q2Prefill,
		LogitsRows: string(o.LogitsRows), KVCacheDType: string(o.KVCacheDType), MambaSSMCacheDType: string(o.MambaSSMCacheDType),
		AllowLongMaxSeqLen: o.AllowLongMaxSeqLen,
	}
}

// planToJSON converts a plan to its --json form: present buffers only.
func planToJSON(p *arena.Plan) planJSON {
	out := planJSON{
		ModelType:  p.ModelType,
		Buffers:    []bufferJSON{},
		Slabs:      []slabJSON{},
		TotalBytes: p.TotalBytes,
		Notes:      nonNil(p.Notes),
		Options:    optionsToJSON(p.Options),
	}
	for _, b := range p.Buffers {
		if b.Present() {
			out.Buffers = append(out.Buffers, bufferJSON{Name: b.ID.String(), DType: b.DType.String(), Shape: b.Shape, Bytes: b.Bytes})
		}
	}
	for _, s := range p.Slabs {
		out.Slabs = append(out.Slabs, slabJSON{Name: s.Name, Bytes: s.Bytes})
	}
	return out
}

// writePlanText writes the plan as a table; listAll adds the absent buffers.
func writePlanText(w io.Writer, config string, p *arena.Plan, listAll bool) {
	o := p.Options
	fmt.Fprintf(w, "model_type %s (%s)\n", p.ModelType, config)
	fmt.Fprintf(w, "options    max_batch_tokens=%d max_seq_len=%d kv_block_size=%d max_batch_size=%d k_max=%d lora_max_rank=%d fp8_rowwise=%t q2_prefill=%t\n",
		o.MaxBatchTokens, o.MaxSeqLen, o.KVBlockSize, o.MaxBatchSize, *o.KMax, o.LoRAMaxRank, o.FP8Rowwise, o.Q2Prefill)
	fmt.Fprintf(w, "           logits_rows=%s kv_cache_dtype=%s mamba_ssm_cache_dtype=%s allow_long_max_seq_len=%t\n\n",
		o.LogitsRows, o.KVCacheDType, o.MambaSSMCacheDType, o.AllowLongMaxSeqLen)
	tw := newTable(w)
	row(tw, "BUFFER", "DTYPE", "SHAPE", "BYTES", "SIZE", "")
	hidden := 0
	for _, b := range p.Buffers {
		switch {
		case b.Present():
			row(tw, b.ID, b.DType, shapeString(b.Shape), b.Bytes, human(b.Bytes), "")
		case listAll:
			row(tw, b.ID, "—", "—", 0, "—", "absent: "+b.Absent)
		default:
			hidden++
		}
	}
	for _, s := range p.Slabs {
		row(tw, s.Name, "—", "(slab)", s.Bytes, human(s.Bytes), "slab, carved bump-only")
	}
	row(tw, "TOTAL", "", "", p.TotalBytes, human(p.TotalBytes), "")
	tw.Flush()
	if hidden > 0 {
		fmt.Fprintf(w, "(%d absent buffers not listed; --all lists them and why)\n", hidden)
	}
	writeNotes(w, p.Notes)
}
