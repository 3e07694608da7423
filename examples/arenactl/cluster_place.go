package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/node"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// localPlaceFlags are the flags of "place" that describe this host's
// devices and so do not travel to a cluster; every other flag does.
var localPlaceFlags = []string{"devices"}

// runCluster asks the node at --cluster where the model fits on the
// cluster and writes the placements; a negative answer (exit status 1)
// when none does. The config and every option are checked here first
// (placeRequest), so a bad flag is named before anything is sent; the
// request carries them all.
func (c *placeCmd) runCluster(ctx context.Context, w io.Writer, fs *pflag.FlagSet) error {
	var refused []string
	fs.Visit(func(f *pflag.Flag) {
		if slices.Contains(localPlaceFlags, f.Name) {
			refused = append(refused, "--"+f.Name)
		}
	})
	if len(refused) > 0 {
		return fmt.Errorf("%s: not carried to the cluster (the cluster's nodes are the devices)", strings.Join(refused, ", "))
	}
	if c.top < 0 {
		return fmt.Errorf("--top %d: must not be negative", c.top)
	}
	if err := c.cluster.check(); err != nil {
		return err
	}
	cfg, req, err := c.fit.placeRequest(fs.Changed, node.PlaceOptions{})
	if err != nil {
		return err
	}
	client, closeClient, err := c.cluster.connect(c.fit.app)
	if err != nil {
		return err
	}
	defer closeClient()
	return c.placeOnCluster(ctx, client, w, cfg.ModelType, req)
}

// placeRequest checks the config and every option of the flags (the plan,
// the fit options) and returns the model's config and the PlaceRequest
// that carries them with po's sizes (node.PlaceRequestFor); changed
// reports whether a flag was given.
func (c *fitCmd) placeRequest(changed func(string) bool, po node.PlaceOptions) (*arena.ModelConfig, *nodepb.PlaceRequest, error) {
	cfg, _, err := c.plan.plan(changed)
	if err != nil {
		return nil, nil, err
	}
	fo, err := c.options(changed)
	if err != nil {
		return nil, nil, err
	}
	data, err := readConfigJSON(c.plan.config)
	if err != nil {
		return nil, nil, err
	}
	req, err := node.PlaceRequestFor(data, c.plan.opts, fo, po)
	if err != nil {
		return nil, nil, err
	}
	return cfg, req, nil
}

// clusterPlaceJSON is "place --cluster --json": the node whose placement
// grain answered, and the placements best first.
type clusterPlaceJSON struct {
	AnsweredBy *nodepb.NodeRef     `json:"answered_by"`
	Placements []*nodepb.Placement `json:"placements"`
}

// placeOnCluster sends req to the node at --cluster and writes its
// placements.
func (c *placeCmd) placeOnCluster(ctx context.Context, client *node.Client, w io.Writer, modelType string, req *nodepb.PlaceRequest) error {
	r, err := client.Place(ctx, c.cluster.cluster, req)
	if err != nil {
		return c.cluster.explain(err)
	}
	ps := r.GetPlacements()
	c.fit.app.logger.Info("place", "model_type", modelType, "cluster", c.cluster.cluster, "answered_by", r.GetAnsweredBy().GetAddress(), "layouts", len(ps))
	total := len(ps)
	if c.top > 0 && len(ps) > c.top {
		ps = ps[:c.top]
	}
	if c.fit.jsonOut {
		err = writeJSON(w, clusterPlaceJSON{AnsweredBy: r.GetAnsweredBy(), Placements: nonNil(ps)})
	} else {
		err = writeClusterPlaceText(w, c.fit.plan.config, modelType, r.GetAnsweredBy().GetAddress(), total, ps)
	}
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return negative(fmt.Errorf("%s fits no layout of the cluster %s sees", modelType, r.GetAnsweredBy().GetAddress()))
	}
	return nil
}

// writeClusterPlaceText writes the ranked cluster placements ps, the best
// of total, as the node at answeredBy saw the cluster, with each stage's
// node and devices.
func writeClusterPlaceText(w io.Writer, config, modelType, answeredBy string, total int, ps []*nodepb.Placement) error {
	fmt.Fprintf(w, "%s (%s) on the cluster as %s sees it: %d layouts fit", modelType, config, answeredBy, total)
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

// readConfigJSON reads the config file loadConfig read (path,
// path/config.json for a model folder, or a built-in config's name), at
// most arena.MaxConfigBytes.
func readConfigJSON(path string) ([]byte, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if data, ok := builtinConfig(path); ok {
			return data, nil
		}
		err = notFound(err)
	}
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
