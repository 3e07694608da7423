package arena

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxHostDevices bounds a Machine's Count: the GPUs of one host, or of
// one NVLink domain (a GB200 NVL72 rack has 72). Place fits every layout
// of up to Count GPUs, and every rank of each, which grows faster than
// Count²: 72 devices take 1.1 s and 0.24 GB for Qwen3-0.6B, 3.3 s and
// 0.84 GB for DeepSeek-V3 (arenactl place); 256 took 16 s and 2.9 GB for
// Qwen3-0.6B.
// Placement across hosts is the cluster's (arenactl place --cluster).
const MaxHostDevices = 72

// Machine is Count devices of one kind on one host ("8xh200").
type Machine struct {
	// Count is how many devices, in [1, MaxHostDevices].
	Count int64 `json:"count"`
	// Preset is the devices' kind and memory (DevicePresets).
	Preset DevicePreset `json:"preset"`
}

// String is "8xh200".
func (m Machine) String() string { return fmt.Sprintf("%dx%s", m.Count, m.Preset.Name) }

// ParseMachine reads "NxPRESET" ("8xh200", "4xh100-80gb"; "x" or "×",
// case-insensitive) or a bare preset name, one device. Errors: an
// *OptionError for "devices" naming the form, a count outside [1,
// MaxHostDevices], or an unknown preset (LookupDevicePreset's list).
func ParseMachine(s string) (Machine, error) {
	bad := func(reason string) error {
		return &OptionError{Option: "devices", Value: clip(s), Reason: reason}
	}
	in := strings.ToLower(strings.TrimSpace(s))
	count, name := int64(1), in
	if i := strings.IndexAny(in, "x×"); i > 0 {
		if n, err := strconv.ParseInt(in[:i], 10, 64); err == nil {
			count = n
			_, size := firstRune(in[i:])
			name = in[i+size:]
		}
	}
	if count < 1 || count > MaxHostDevices {
		return Machine{}, bad(fmt.Sprintf("the device count must be in [1, %d], the GPUs of one host or NVLink domain; want NxPRESET such as 8xh200 (place across hosts on a cluster)", MaxHostDevices))
	}
	p, err := LookupDevicePreset(name)
	if err != nil {
		var oe *OptionError
		if errors.As(err, &oe) {
			return Machine{}, bad(oe.Reason + "; want NxPRESET such as 8xh200")
		}
		return Machine{}, err
	}
	return Machine{Count: count, Preset: p}, nil
}

// firstRune is s's first rune and its size in bytes.
func firstRune(s string) (rune, int) {
	for _, r := range s {
		return r, len(string(r))
	}
	return 0, 0
}

// Placement is one layout that fits and its per-rank fit.
type Placement struct {
	Layout ParallelLayout `json:"layout"`
	Fit    *RankFitReport `json:"fit"`
}

// Place lists the layouts of at most devices.Count GPUs on which cfg
// fits under opts and fo, each device empty (FreeBytes = TotalBytes):
// every tensor_parallel_size t, pipeline_parallel_size p and
// data_parallel_size d with t·p·d ≤ Count, and for an MoE model with
// t·d > 1 each with and without expert parallelism. A layout the model
// cannot be split by (PlanRanks's *ParallelError) is skipped. They are
// ranked by fewest GPUs, then most KV tokens, then most concurrent
// sequences at max_seq_len, then smaller t, p, d, expert parallelism off
// first. An empty list means nothing fits. Errors: an *OptionError for a
// count outside [1, MaxHostDevices] or, with more than one device, set
// checkpoint sizes; FitRanks's other errors (options, overflow).
func Place(cfg *ModelConfig, opts Options, devices Machine, fo FitOptions) ([]Placement, error) {
	if devices.Count < 1 || devices.Count > MaxHostDevices {
		return nil, &OptionError{Option: "devices", Value: devices.Count, Reason: fmt.Sprintf("the device count must be in [1, %d], the GPUs of one host or NVLink domain", MaxHostDevices)}
	}
	if err := cfg.checkSizes(); err != nil {
		return nil, err
	}
	if devices.Count > 1 && (fo.CheckpointWeightBytes != nil || fo.CheckpointPooledTensorBytes != nil) {
		return nil, &OptionError{Option: "checkpoint_weight_bytes", Value: devices.Count,
			Reason: "a checkpoint's sizes are per model, not per rank: placement over several GPUs sizes the weights by estimate"}
	}
	dev := []DeviceMemory{{TotalBytes: devices.Preset.TotalBytes, FreeBytes: devices.Preset.TotalBytes}}
	var out []Placement
	n := devices.Count
	for t := int64(1); t <= n; t++ {
		for p := int64(1); t*p <= n; p++ {
			for d := int64(1); t*p*d <= n; d++ {
				eps := []bool{false}
				if cfg.NumExperts > 0 && cfg.Counts.MoE > 0 && t*d > 1 {
					eps = append(eps, true)
				}
				for _, ep := range eps {
					l := ParallelLayout{TensorParallelSize: t, PipelineParallelSize: p, DataParallelSize: d, EnableExpertParallel: ep}
					r, err := fitRanks(cfg, opts, l, dev, fo)
					if errors.Is(err, ErrParallelLayout) {
						continue
					}
					if err != nil {
						return nil, err
					}
					if r.Fits {
						out = append(out, Placement{Layout: r.Layout, Fit: r})
					}
				}
			}
		}
	}
	slices.SortStableFunc(out, comparePlacements)
	return out, nil
}

// comparePlacements orders placements as Place ranks them.
func comparePlacements(a, b Placement) int {
	la, lb := a.Layout, b.Layout
	return cmp.Or(
		cmp.Compare(a.Fit.GPUs, b.Fit.GPUs),
		cmp.Compare(b.Fit.KVTokens, a.Fit.KVTokens),
		cmp.Compare(b.Fit.MaxConcurrentSeqs, a.Fit.MaxConcurrentSeqs),
		cmp.Compare(la.TensorParallelSize, lb.TensorParallelSize),
		cmp.Compare(la.PipelineParallelSize, lb.PipelineParallelSize),
		cmp.Compare(la.DataParallelSize, lb.DataParallelSize),
		compareBool(la.EnableExpertParallel, lb.EnableExpertParallel),
	)
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
