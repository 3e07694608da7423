package node

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// Stage is one pipeline stage of a cluster placement: the node that runs
// it and its devices, tensor-parallel rank r on Devices[r].
type Stage struct {
	Address  string  `json:"address"`
	MemberID string  `json:"member_id"`
	Devices  []int32 `json:"devices"`
}

// ClusterPlacement is one layout across nodes that fits: tensor parallel
// within a node, pipeline parallel across nodes (as vLLM deploys a model
// past one host: tensor_parallel_size the GPUs of a node,
// pipeline_parallel_size the nodes), with every rank's fit on the device
// it would take as the inventories last reported it.
type ClusterPlacement struct {
	Layout arena.ParallelLayout `json:"layout"`
	// Stages are the pipeline stages in order, one node each.
	Stages []Stage `json:"stages"`
	// Fit is arena.FitRanks on the stages' devices (free memory as
	// inventoried), ranks in vLLM's global order (TP fastest).
	Fit *arena.RankFitReport `json:"fit"`
}

// PlaceOptions narrows the layouts Place tries; zero fields try every
// size.
type PlaceOptions struct {
	// TensorParallelSize, when set, is the only tensor_parallel_size tried.
	TensorParallelSize int64
	// PipelineParallelSize, when set, is the only pipeline_parallel_size
	// (nodes) tried.
	PipelineParallelSize int64
}

// Place answers where cfg under opts and fo can run on the nodes of invs:
// every tensor_parallel_size t some node has t devices for, and every
// pipeline_parallel_size p up to the nodes that do, t·p ≤
// arena.MaxParallelSize. For each (t, p) it takes, on each node, the t
// devices with the most free memory, and the p nodes whose t-th device
// has the most (ties by address), then fits every rank on its device
// (arena.FitRanks). Layouts the model cannot be split by are skipped. The
// answer holds the layouts that fit, ranked fewest GPUs first, then fewest
// nodes, then most KV tokens; empty when nothing fits. Data parallelism,
// expert parallelism and several stages on one node are not tried. The
// answer is advice: a node's ledger decides when memory is reserved.
// Errors: arena.FitRanks's (options, overflow) other than
// arena.ErrParallelLayout.
func Place(cfg *arena.ModelConfig, opts arena.Options, fo arena.FitOptions, po PlaceOptions, invs []*nodepb.Inventory) ([]ClusterPlacement, error) {
	maxT := 0
	for _, inv := range invs {
		maxT = max(maxT, len(inv.GetDevices()))
	}
	var out []ClusterPlacement
	for t := int64(1); t <= int64(maxT); t++ {
		if po.TensorParallelSize > 0 && t != po.TensorParallelSize {
			continue
		}
		nodes := nodesFor(invs, t)
		for p := int64(1); p <= int64(len(nodes)) && t*p <= arena.MaxParallelSize; p++ {
			if po.PipelineParallelSize > 0 && p != po.PipelineParallelSize {
				continue
			}
			c, err := fitOn(cfg, opts, fo, arena.ParallelLayout{TensorParallelSize: t, PipelineParallelSize: p}, nodes[:p])
			if errors.Is(err, arena.ErrParallelLayout) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if c.Fit.Fits {
				out = append(out, c)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b ClusterPlacement) int {
		return cmp.Or(cmp.Compare(a.Fit.GPUs, b.Fit.GPUs), cmp.Compare(len(a.Stages), len(b.Stages)),
			cmp.Compare(b.Fit.KVTokens, a.Fit.KVTokens))
	})
	return out, nil
}

// candidate is one node's t devices with the most free memory.
type candidate struct {
	inv     *nodepb.Inventory
	devices []*nodepb.DeviceInventory
}

// nodesFor returns the nodes with at least t devices, each with its t
// devices of most free memory (ties by index), best node first: most free
// memory on its t-th device, ties by address.
func nodesFor(invs []*nodepb.Inventory, t int64) []candidate {
	var out []candidate
	for _, inv := range invs {
		if int64(len(inv.GetDevices())) < t {
			continue
		}
		devs := slices.Clone(inv.GetDevices())
		slices.SortStableFunc(devs, func(a, b *nodepb.DeviceInventory) int {
			return cmp.Or(cmp.Compare(b.GetFreeBytes(), a.GetFreeBytes()), cmp.Compare(a.GetIndex(), b.GetIndex()))
		})
		out = append(out, candidate{inv: inv, devices: devs[:t]})
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.devices[len(b.devices)-1].GetFreeBytes(), a.devices[len(a.devices)-1].GetFreeBytes()),
			cmp.Compare(a.inv.GetAddress(), b.inv.GetAddress()))
	})
	return out
}

// fitOn fits layout l with stage s on nodes[s].
func fitOn(cfg *arena.ModelConfig, opts arena.Options, fo arena.FitOptions, l arena.ParallelLayout, nodes []candidate) (ClusterPlacement, error) {
	c := ClusterPlacement{Layout: l}
	var devs []arena.DeviceMemory
	for _, n := range nodes {
		st := Stage{Address: n.inv.GetAddress(), MemberID: n.inv.GetMemberId()}
		for _, d := range n.devices {
			st.Devices = append(st.Devices, d.GetIndex())
			devs = append(devs, arena.DeviceMemory{TotalBytes: d.GetTotalBytes(), FreeBytes: min(d.GetFreeBytes(), d.GetTotalBytes())})
		}
		c.Stages = append(c.Stages, st)
	}
	r, err := arena.FitRanks(cfg, opts, l, devs, fo)
	if err != nil {
		return c, fmt.Errorf("place %s on %d node(s): %w", l, len(nodes), err)
	}
	c.Fit = r
	return c, nil
}
