package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/arena"
)

const placeLong = `Place lists the parallel layouts on which the model fits, on at most
--devices GPUs (NxPRESET: 8xh200, 4xh100-80gb; the presets of "fit
--device"), each device empty: every tensor_parallel_size t,
pipeline_parallel_size p and data_parallel_size d with t·p·d ≤ N, and for an
MoE model each with and without expert parallelism, as vLLM would split the
model (heads and widths over t, layers over p by get_pp_indices, experts over
t·d). Layouts the model cannot be split by (t = 3 for 32 heads) are left out.

They are ranked by fewest GPUs, then most KV-cache tokens, then most
concurrent sequences at max_seq_len; each comes with its per-rank breakdown
(layers, heads, KV heads, experts, weights, arena, KV blocks). The serving
flags and the budget flags are those of "arenactl fit".

With --cluster HOST:PORT (a node of a cluster of "arenactl node"s) the
layouts are the cluster's instead: the node hands the question to a
placement grain, which the cluster runs on one of its nodes, and the grain
answers from that node's view of the nodes' free memory (the output names
it): tensor parallel within a node, pipeline parallel across nodes, each
stage's node and devices listed (see "arenactl cluster" for
--client-listen, --timeout and the TLS flags). Every serving and budget
flag travels with it; --devices, this host's GPUs, is refused.

Exit status: 0 when a layout fits, 1 when none does, 2 on an error.`

// placeCmd holds the flags of "arenactl place".
type placeCmd struct {
	fit     fitCmd // the plan and budget flags, shared with fit
	devices string
	top     int
	cluster clusterFlags // --cluster and its connection flags
}

// newPlaceCmd builds "arenactl place".
func newPlaceCmd(a *app) *cobra.Command {
	c := &placeCmd{fit: fitCmd{app: a}}
	cmd := &cobra.Command{
		Use:   "place --config FILE [--devices 8xh200 | --cluster HOST:PORT] [flags]",
		Short: "List the parallel layouts on which the model fits (exit 1 when none does)",
		Long:  placeLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("cluster") {
				return c.runCluster(cmd.Context(), cmd.OutOrStdout(), cmd.Flags())
			}
			return c.run(cmd.OutOrStdout(), cmd.Flags().Changed)
		},
	}
	fs := cmd.Flags()
	c.fit.plan.register(fs, "")
	c.fit.registerBudget(fs)
	fs.StringVar(&c.devices, "devices", "8xh200", fmt.Sprintf("the GPUs of the host, NxPRESET with N at most %d (presets: those of fit --device)", arena.MaxHostDevices))
	fs.IntVar(&c.top, "top", 0, "list only the best N layouts (0: all that fit)")
	fs.BoolVar(&c.fit.jsonOut, "json", false, "print the layouts as JSON")
	fs.StringVar(&c.cluster.cluster, "cluster", "", "place on a running cluster instead: a node's --listen address (host:port)")
	c.cluster.register(fs)
	return cmd
}

// run places the model and writes the layouts that fit; it returns a
// negative answer (exit status 1) when none does.
func (c *placeCmd) run(w io.Writer, changed func(string) bool) error {
	if c.top < 0 {
		return fmt.Errorf("--top %d: must not be negative", c.top)
	}
	m, err := arena.ParseMachine(c.devices)
	if err != nil {
		return withFlag(err)
	}
	cfg, _, err := c.fit.plan.plan(changed)
	if err != nil {
		return err
	}
	opts, err := c.fit.options(changed)
	if err != nil {
		return err
	}
	ps, err := arena.Place(cfg, c.fit.plan.opts, m, opts)
	if err != nil {
		return withFlag(err)
	}
	c.fit.app.logger.Info("place", "model_type", cfg.ModelType, "devices", m.String(), "layouts", len(ps))
	total := len(ps)
	if c.top > 0 && len(ps) > c.top {
		ps = ps[:c.top]
	}
	if c.fit.jsonOut {
		err = writeJSON(w, nonNil(ps))
	} else {
		writePlaceText(w, c.fit.plan.config, cfg.ModelType, m, total, ps)
	}
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return negative(fmt.Errorf("%s fits no layout of %s", cfg.ModelType, m))
	}
	return nil
}

// writePlaceText writes the ranked layouts ps, the best of total that
// fit, each with its ranks.
func writePlaceText(w io.Writer, config, modelType string, m arena.Machine, total int, ps []arena.Placement) {
	fmt.Fprintf(w, "%s (%s) on %s (%s, %s each): %d layouts fit", modelType, config, m, m.Preset.Device, bytesAndHuman(m.Preset.TotalBytes), total)
	if len(ps) < total {
		fmt.Fprintf(w, ", the best %d listed", len(ps))
	}
	fmt.Fprintln(w)
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "#", "gpus", "layout", "kv blocks", "kv tokens", fmt.Sprintf("seqs at %d", ps[0].Fit.MaxSeqLen))
	for i, p := range ps {
		row(tw, i+1, p.Fit.GPUs, p.Layout.String(), p.Fit.KVBlocks, p.Fit.KVTokens, p.Fit.MaxConcurrentSeqs)
	}
	tw.Flush()
	for i, p := range ps {
		fmt.Fprintf(w, "\n#%d %s on %d GPUs:\n", i+1, p.Layout, p.Fit.GPUs)
		writeRanks(w, p.Fit)
	}
}

// writeRanks writes a layout's per-rank breakdown and its KV totals.
func writeRanks(w io.Writer, r *arena.RankFitReport) {
	tw := newTable(w)
	row(tw, "rank", "tp", "pp", "dp", "layers", "heads", "kv heads", "experts", "weights", "arena", "kv blocks", "fits")
	for _, rk := range r.Ranks {
		f := rk.Report
		row(tw, rk.Rank, rk.TP, rk.PP, rk.DP, fmt.Sprintf("[%d, %d)", rk.FirstLayer, rk.EndLayer), rk.AttentionHeads, rk.KVHeads, rk.Experts,
			human(f.WeightBytes), human(f.ArenaBytes), f.KVBlocks, f.Fits)
	}
	tw.Flush()
	fmt.Fprintf(w, "kv cache: %d blocks (the fewest of any rank) × %d data-parallel replicas = %d tokens; %d sequences of max_seq_len %d at once\n",
		r.KVBlocks, r.Layout.DataParallelSize, r.KVTokens, r.MaxConcurrentSeqs, r.MaxSeqLen)
}
