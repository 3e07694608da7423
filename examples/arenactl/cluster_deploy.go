package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/node"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// deployFlags are the flags of "cluster build", "cluster load" and
// "cluster meminfo" beyond the reservation's.
type deployFlags struct {
	fit      fitCmd // --config and the serving and budget options, as place takes them
	layout   node.PlaceOptions
	stage    int64
	devices  []int32
	modelDir string
	memDev   int32
}

// newClusterBuildCmd is "cluster build": one pipeline stage of a model
// deployed on a node's devices under a key, for a lease.
func newClusterBuildCmd(c *clusterCmd) *cobra.Command {
	d := &c.deploy
	d.fit.app = c.app
	cmd := &cobra.Command{
		Use: "build --cluster HOST:PORT [--node HOST:PORT] --key K --config FILE --devices 0,1 " +
			"[--tensor-parallel-size T] [--pipeline-parallel-size P --stage S] [--ttl 30s] [flags]",
		Short: "Build a model's arenas on a node's devices under a key, for a lease (idempotent by key)",
		Long: `Build deploys one pipeline stage of the model of --config on the node
(--node, default --cluster): global rank S·T + r of the layout
(arena.PlanRanks) on --devices[r], one device per tensor-parallel rank, each
its arena, all or nothing. The devices must hold nothing (no reservation,
no other deployment); a released deployment's devices are reset
(Manager.Reset) and take the next one. The serving and budget flags are
those of "place". The
deployment is held under --key for --ttl ("cluster renew" extends it,
"cluster release" or a lapsed lease frees every byte on its devices);
building again with the same key and flags returns the same deployment.
"cluster load" loads its weights.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := c.buildRequest(cmd.Flags())
			if err != nil {
				return err
			}
			return c.run(cmd.Context(), cmd.OutOrStdout(), "key", func(ctx context.Context, client *node.Client, w io.Writer) error {
				return c.build(ctx, client, w, req)
			})
		},
	}
	fs := cmd.Flags()
	d.fit.plan.register(fs, "")
	d.fit.registerBudget(fs)
	fs.Int64Var(&d.layout.TensorParallelSize, "tensor-parallel-size", 1, "tensor_parallel_size T: the ranks of the stage, one per --devices entry")
	fs.Int64Var(&d.layout.PipelineParallelSize, "pipeline-parallel-size", 1, "pipeline_parallel_size P: the stages, one node each")
	fs.Int64Var(&d.stage, "stage", 0, "the pipeline stage this node hosts, 0 to P-1")
	fs.Int32SliceVar(&d.devices, "devices", nil, "the node's device indexes, one per tensor-parallel rank (tensor-parallel rank r on the r-th; required)")
	return cmd
}

// buildRequest checks build's flags (the config and every option, as
// place --cluster does) and returns the BuildRequest they make.
func (c *clusterCmd) buildRequest(fs *pflag.FlagSet) (*nodepb.BuildRequest, error) {
	d := &c.deploy
	if len(d.devices) == 0 {
		return nil, errors.New("--devices: the node's devices, one per tensor-parallel rank, are required")
	}
	_, model, err := d.fit.placeRequest(fs.Changed, d.layout)
	if err != nil {
		return nil, err
	}
	return &nodepb.BuildRequest{Key: c.key, TtlMs: c.ttl.Milliseconds(), Model: model, Stage: d.stage, Devices: d.devices}, nil
}

// build sends req to --node and writes the deployment.
func (c *clusterCmd) build(ctx context.Context, client *node.Client, w io.Writer, req *nodepb.BuildRequest) error {
	dep, err := client.Build(ctx, c.node, req)
	if err != nil {
		return err
	}
	return c.writeDeployment(w, "built", dep)
}

// load loads --model-dir into --key's deployment on --node.
func (c *clusterCmd) load(ctx context.Context, client *node.Client, w io.Writer) error {
	if c.deploy.modelDir == "" {
		return errors.New("--model-dir: the model folder on the node is required")
	}
	dep, err := client.Load(ctx, c.node, c.key, c.deploy.modelDir)
	if err != nil {
		return err
	}
	return c.writeDeployment(w, "loaded", dep)
}

// meminfo writes the memory of --device (every device when < 0) of --node.
func (c *clusterCmd) meminfo(ctx context.Context, client *node.Client, w io.Writer) error {
	devs, err := client.MemInfo(ctx, c.node, c.deploy.memDev)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return writeJSON(w, nonNil(devs))
	}
	fmt.Fprintf(w, "%s\n\n", c.node)
	tw := newTable(w)
	row(tw, "device", "free", "total", "budget", "ledger")
	for _, d := range devs {
		row(tw, d.GetDevice(), human(d.GetFreeBytes()), human(d.GetTotalBytes()), human(d.GetBudgetBytes()), human(d.GetLedgerBytes()))
	}
	return tw.Flush()
}

// writeDeployment writes dep as text or JSON.
func (c *clusterCmd) writeDeployment(w io.Writer, verb string, dep *nodepb.Deployment) error {
	if c.jsonOut {
		return writeJSON(w, dep)
	}
	layout := arena.ParallelLayout{TensorParallelSize: dep.GetTensorParallelSize(), PipelineParallelSize: dep.GetPipelineParallelSize()}
	fmt.Fprintf(w, "%s %q on %s: %s, stage %d of %s, lease until %s (ttl %v)\n", verb, dep.GetKey(), c.node, dep.GetModelType(),
		dep.GetStage(), layout, time.UnixMilli(dep.GetExpiresUnixMs()).UTC().Format(time.RFC3339Nano),
		time.Duration(dep.GetTtlMs())*time.Millisecond)
	if dep.GetLoaded() {
		fmt.Fprintf(w, "weights from %s\n", dep.GetModelDir())
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "device", "rank", "arena", "weights")
	for _, d := range dep.GetDevices() {
		row(tw, d.GetDevice(), d.GetRank(), bytesAndHuman(d.GetArenaBytes()), bytesAndHuman(d.GetWeightsBytes()))
	}
	return tw.Flush()
}
