package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/node"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// clusterPlaceFlags are the flags "place --cluster" takes: those a
// nodepb.PlaceRequest carries, the output's and the connection's.
var clusterPlaceFlags = []string{"cluster", "client-listen", "timeout", "log-level", "config", "max-batch-tokens", "max-seq-len",
	"gpu-memory-utilization", "weight-dtype", "top", "json"}

// runCluster asks the node at --cluster where the model fits on the
// cluster and writes the placements; a negative answer (exit status 1)
// when none does. The config is checked here first (arena.LoadConfig and
// the plan), so a bad flag is named before anything is sent.
func (c *placeCmd) runCluster(ctx context.Context, w io.Writer, fs *pflag.FlagSet) error {
	var refused []string
	fs.Visit(func(f *pflag.Flag) {
		if !slices.Contains(clusterPlaceFlags, f.Name) {
			refused = append(refused, "--"+f.Name)
		}
	})
	if len(refused) > 0 {
		return fmt.Errorf("%s: not carried to the cluster (with --cluster only --%s)", strings.Join(refused, ", "),
			strings.Join(clusterPlaceFlags[4:], ", --"))
	}
	if c.top < 0 {
		return fmt.Errorf("--top %d: must not be negative", c.top)
	}
	if err := c.cluster.check(); err != nil {
		return err
	}
	cfg, _, err := c.fit.plan.plan(fs.Changed)
	if err != nil {
		return err
	}
	fo, err := c.fit.options(fs.Changed)
	if err != nil {
		return err
	}
	data, err := readConfigJSON(c.fit.plan.config)
	if err != nil {
		return err
	}
	req := &nodepb.PlaceRequest{ConfigJson: data, MaxBatchTokens: c.fit.plan.opts.MaxBatchTokens, MaxSeqLen: c.fit.plan.opts.MaxSeqLen,
		WeightDtype: c.fit.weightDType}
	if fo.GPUMemoryUtilization != nil {
		req.GpuMemoryUtilization = *fo.GPUMemoryUtilization
	}
	client, closeClient, err := c.cluster.connect(c.fit.app)
	if err != nil {
		return err
	}
	defer closeClient()
	return c.placeOnCluster(ctx, client, w, cfg.ModelType, req)
}

// placeOnCluster sends req to the node at --cluster and writes its
// placements.
func (c *placeCmd) placeOnCluster(ctx context.Context, client *node.Client, w io.Writer, modelType string, req *nodepb.PlaceRequest) error {
	ps, err := client.Place(ctx, c.cluster.cluster, req)
	if err != nil {
		return err
	}
	c.fit.app.logger.Info("place", "model_type", modelType, "cluster", c.cluster.cluster, "layouts", len(ps))
	total := len(ps)
	if c.top > 0 && len(ps) > c.top {
		ps = ps[:c.top]
	}
	if c.fit.jsonOut {
		err = writeJSON(w, nonNil(ps))
	} else {
		err = writeClusterPlaceText(w, c.fit.plan.config, modelType, c.cluster.cluster, total, ps)
	}
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return negative(fmt.Errorf("%s fits no layout of the cluster %s sees", modelType, c.cluster.cluster))
	}
	return nil
}

// writeClusterPlaceText writes the ranked cluster placements ps, the best
// of total, with each stage's node and devices.
func writeClusterPlaceText(w io.Writer, config, modelType, cluster string, total int, ps []*nodepb.Placement) error {
	fmt.Fprintf(w, "%s (%s) on the cluster as %s sees it: %d layouts fit", modelType, config, cluster, total)
	if len(ps) < total {
		fmt.Fprintf(w, ", the best %d listed", len(ps))
	}
	fmt.Fprintln(w)
	if len(ps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	row(tw, "#", "gpus", "layout", "kv blocks", "kv tokens", "seqs at max_seq_len", "stages (node [devices])")
	for i, p := range ps {
		var stages []string
		for _, s := range p.GetStages() {
			stages = append(stages, fmt.Sprintf("%s %v", s.GetAddress(), s.GetDevices()))
		}
		row(tw, i+1, p.GetGpus(), arena.ParallelLayout{TensorParallelSize: p.GetTensorParallelSize(), PipelineParallelSize: p.GetPipelineParallelSize()}.String(),
			p.GetKvBlocks(), p.GetKvTokens(), p.GetMaxConcurrentSeqs(), strings.Join(stages, ", "))
	}
	return tw.Flush()
}

// readConfigJSON reads the config file LoadConfig read (path, or
// path/config.json for a model folder), at most arena.MaxConfigBytes.
func readConfigJSON(path string) ([]byte, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, arena.MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	if len(data) > arena.MaxConfigBytes {
		return nil, fmt.Errorf("--config %s: larger than %d bytes", path, arena.MaxConfigBytes)
	}
	return data, nil
}
