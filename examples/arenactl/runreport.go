package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// runReport is what "arenactl run" measured; its JSON field order is the
// output's: the required keys first, then the extras.
type runReport struct {
	ArenaBytes              int64   `json:"arena_bytes"`
	BuildMS                 float64 `json:"build_ms"`
	Steps                   int     `json:"steps"`
	MaxConcurrentForwards   int     `json:"max_concurrent_forwards"`
	BackendThreads          int     `json:"backend_threads"`
	LedgerBytesAfterRelease int64   `json:"ledger_bytes_after_release"`
	GoroutinesBefore        int     `json:"goroutines_before"`
	GoroutinesAfter         int     `json:"goroutines_after"`
	DeviceFreeBefore        int64   `json:"device_free_before"`
	DeviceFreeBuilt         int64   `json:"device_free_built"`
	DeviceFreeAfter         int64   `json:"device_free_after"`
	// DeviceFreeBaseline and DeviceFreeClosed (real devices only) are the
	// device's free memory as a fresh manager reads it before the run and
	// after its Close (freshFree).
	DeviceFreeBaseline int64 `json:"device_free_baseline,omitempty"`
	DeviceFreeClosed   int64 `json:"device_free_closed,omitempty"`

	ModelType          string `json:"model_type"`
	Config             string `json:"config"`
	Backend            string `json:"backend"`
	Device             string `json:"device"`
	DeviceTotalBytes   int64  `json:"device_total_bytes"`
	BudgetBytes        int64  `json:"budget_bytes"`
	Layout             string `json:"layout"`
	ExpectedArenaBytes int64  `json:"expected_arena_bytes"`
	// ArenaFits: the arena and one max_seq_len sequence's KV cache fit the
	// budget, the weights and reserve left out: what run builds.
	ArenaFits bool `json:"arena_fits"`
	// ModelFits: the whole model fits, weights included (ModelWeightBytes,
	// from ModelWeightSource: "checkpoint" with --model, else "estimate"),
	// with ModelKVBlocks KV blocks; otherwise short by ModelShortfallBytes.
	ModelFits           bool        `json:"model_fits"`
	ModelWeightBytes    int64       `json:"model_weight_bytes"`
	ModelWeightSource   string      `json:"model_weight_source"`
	ModelShortfallBytes int64       `json:"model_shortfall_bytes"`
	ModelKVBlocks       int64       `json:"model_kv_blocks"`
	Clients             int         `json:"clients"`
	StepsWallMS         float64     `json:"steps_wall_ms"`
	StepP50US           float64     `json:"step_p50_us"`
	StepP99US           float64     `json:"step_p99_us"`
	StepMaxUS           float64     `json:"step_max_us"`
	Slabs               int         `json:"slabs"`
	SlabCarves          []carveJSON `json:"slab_carves"`
	ReleaseMS           float64     `json:"release_ms"`
	ReleasedAllocations int         `json:"released_allocations"`
	LedgerPeakBytes     int64       `json:"ledger_peak_bytes"`
	// Rank is run --rank's rank of a layout and its fit (run_rank.go); nil
	// without --rank.
	Rank *rankReport `json:"rank,omitempty"`
	// The weights of --model: their bytes, what their load allocated, how
	// long it took and its rate (10^9 B/s); all 0 without --model.
	WeightsBytes          int64   `json:"weights_bytes,omitempty"`
	WeightsAllocatedBytes int64   `json:"weights_allocated_bytes,omitempty"`
	WeightsLoadMS         float64 `json:"weights_load_ms,omitempty"`
	WeightsLoadGBps       float64 `json:"weights_load_gbps,omitempty"`
	// Served: run built the KV cache and served a trace (--kv): the
	// cache's bytes, paged blocks and sequences (sliding blocks and state
	// slots), its build time and the device's free memory after it; the
	// trace's requests, those finished, the preemptions, the most paged
	// blocks in use at once, the prefix cache's lookups, hits and tokens
	// saved, and the KV supervisor round trips.
	Served            bool    `json:"served"`
	KVCacheBytes      int64   `json:"kv_cache_bytes,omitempty"`
	KVBlocks          int64   `json:"kv_blocks,omitempty"`
	KVSeqs            int64   `json:"kv_seqs,omitempty"`
	KVBuildMS         float64 `json:"kv_build_ms,omitempty"`
	DeviceFreeKV      int64   `json:"device_free_kv,omitempty"`
	Requests          int     `json:"requests,omitempty"`
	SequencesFinished int     `json:"sequences_finished,omitempty"`
	Preemptions       int     `json:"preemptions"`
	KVPeakUsedBlocks  int     `json:"kv_peak_used_blocks,omitempty"`
	PrefixQueries     int64   `json:"prefix_queries"`
	PrefixHits        int64   `json:"prefix_hits"`
	PrefixHitTokens   int64   `json:"prefix_hit_tokens"`
	KVRoundTrips      int     `json:"kv_round_trips,omitempty"`
	// The kernels each step of --model ran (run_compute.go).
	computeReport
	InvariantsFailed []string `json:"invariants_failed"`
}

// failed records a broken invariant.
func (r *runReport) failed(what string) { r.InvariantsFailed = append(r.InvariantsFailed, what) }

// setLatencies records the steps' p50, p99 and max run times.
func (r *runReport) setLatencies(ds []time.Duration) {
	s := sortedDurations(ds)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	r.StepP50US, r.StepP99US = us(percentile(s, 0.50)), us(percentile(s, 0.99))
	if len(s) > 0 {
		r.StepMaxUS = us(s[len(s)-1])
	}
}

// realDeviceSlackPerAllocation is what the driver may round each allocation
// up by: its 2 MiB physical page.
const realDeviceSlackPerAllocation = 2 << 20

// checkInvariants records every invariant the run broke (design.md §7). On
// the simulated device the free memory must drop by exactly arena_bytes; on
// a real one, where the driver rounds allocations up to its pages, within 2%
// of arena_bytes or 2 MiB per allocation, whichever is larger. Either way it
// must come back to where it was.
func (r *runReport) checkInvariants(simulated bool) {
	if r.MaxConcurrentForwards > 1 {
		r.failed(fmt.Sprintf("max_concurrent_forwards is %d, want 1", r.MaxConcurrentForwards))
	}
	if r.BackendThreads != 1 {
		r.failed(fmt.Sprintf("backend_threads is %d, want 1", r.BackendThreads))
	}
	if r.LedgerBytesAfterRelease != 0 {
		r.failed(fmt.Sprintf("ledger_bytes_after_release is %d, want 0", r.LedgerBytesAfterRelease))
	}
	if r.GoroutinesAfter > r.GoroutinesBefore {
		r.failed(fmt.Sprintf("goroutines_after is %d, more than goroutines_before %d", r.GoroutinesAfter, r.GoroutinesBefore))
	}
	if r.ArenaBytes != r.ExpectedArenaBytes {
		r.failed(fmt.Sprintf("arena_bytes is %d, want %d (the plan's, %s layout)", r.ArenaBytes, r.ExpectedArenaBytes, r.Layout))
	}
	used := r.DeviceFreeBefore - r.DeviceFreeBuilt
	held := r.ArenaBytes + r.WeightsAllocatedBytes // the weights' load came before the build
	if simulated {
		if used != held {
			r.failed(fmt.Sprintf("the device lost %d B to the build, want arena_bytes %d + weights_allocated_bytes %d", used, r.ArenaBytes, r.WeightsAllocatedBytes))
		}
	} else {
		slack := max(held/50, int64(r.ReleasedAllocations)*realDeviceSlackPerAllocation)
		if d := used - held; d < -slack || d > slack {
			r.failed(fmt.Sprintf("the device lost %d B to the build, %d B away from arena_bytes %d + weights_allocated_bytes %d (allowed %d B)", used, d, r.ArenaBytes, r.WeightsAllocatedBytes, slack))
		}
	}
	if r.Served {
		r.checkServed(simulated)
	}
	switch {
	case simulated && r.DeviceFreeAfter != r.DeviceFreeBefore:
		r.failed(fmt.Sprintf("device_free_after is %d, want device_free_before %d", r.DeviceFreeAfter, r.DeviceFreeBefore))
	case !simulated && r.DeviceFreeClosed != r.DeviceFreeBaseline:
		// After the release the context may still hold the driver's launch
		// resources (the first kernel's); after Close nothing of the run's.
		r.failed(fmt.Sprintf("device_free_closed is %d, want device_free_baseline %d (what a fresh context sees before the run)", r.DeviceFreeClosed, r.DeviceFreeBaseline))
	}
	r.SlabCarves = nonNil(r.SlabCarves)
	r.InvariantsFailed = nonNil(r.InvariantsFailed)
}

// checkServed records the serving run's broken invariants: every request
// finished, and the KV cache took exactly its bytes of the device
// (hostsim; on a real device within 2 MiB per group).
func (r *runReport) checkServed(simulated bool) {
	if r.SequencesFinished != r.Requests {
		r.failed(fmt.Sprintf("sequences_finished is %d, want the trace's %d requests", r.SequencesFinished, r.Requests))
	}
	used := r.DeviceFreeBuilt - r.DeviceFreeKV
	if d := used - r.KVCacheBytes; (simulated && d != 0) || d < -4*realDeviceSlackPerAllocation || d > 4*realDeviceSlackPerAllocation {
		r.failed(fmt.Sprintf("the device lost %d B to the KV cache, want kv_cache_bytes %d", used, r.KVCacheBytes))
	}
}

// LogValue logs the report's main numbers.
func (r *runReport) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("arena_bytes", r.ArenaBytes),
		slog.Int("steps", r.Steps),
		slog.Int("max_concurrent_forwards", r.MaxConcurrentForwards),
		slog.Int("backend_threads", r.BackendThreads),
		slog.Int64("ledger_bytes_after_release", r.LedgerBytesAfterRelease),
		slog.Int("goroutines_before", r.GoroutinesBefore),
		slog.Int("goroutines_after", r.GoroutinesAfter),
		slog.Int64("device_free_after", r.DeviceFreeAfter),
	)
}

// writeRunText writes the report for a reader.
func writeRunText(w io.Writer, r *runReport) {
	if r.Served {
		fmt.Fprintf(w, "run %s (%s) on %s %q: %d steps serving %d requests\n\n", r.ModelType, r.Config, r.Backend, r.Device, r.Steps, r.Requests)
	} else {
		fmt.Fprintf(w, "run %s (%s) on %s %q: %d steps from %d clients\n\n", r.ModelType, r.Config, r.Backend, r.Device, r.Steps, r.Clients)
	}
	tw := newTable(w)
	row(tw, "device", fmt.Sprintf("%s total, budget %s", bytesAndHuman(r.DeviceTotalBytes), human(r.BudgetBytes)))
	if r.Rank != nil {
		row(tw, "rank fit", fmt.Sprintf("%s: the rank's weight shard, arena and one sequence's KV cache (arena.FitRank, with the shard's sizes)", yesNo(r.ArenaFits, "fits", "does not fit")))
	} else if r.WeightsBytes > 0 {
		row(tw, "arena fit", fmt.Sprintf("%s: the arena and one sequence's KV cache (the weights are in the model fit)", yesNo(r.ArenaFits, "fits", "does not fit")))
	} else {
		row(tw, "arena fit", fmt.Sprintf("%s: the arena and one sequence's KV cache, weights left out (what run builds)", yesNo(r.ArenaFits, "fits", "does not fit")))
	}
	model := fmt.Sprintf("fits, %d KV blocks", r.ModelKVBlocks)
	if !r.ModelFits {
		model = fmt.Sprintf("DOES NOT FIT, short by %s", bytesAndHuman(r.ModelShortfallBytes))
		if r.WeightsBytes == 0 {
			model += "; run builds only the arena"
		}
	}
	source := r.ModelWeightSource
	switch source {
	case "estimate":
		source = "estimated from config.json"
	case "checkpoint":
		source = "the checkpoint's"
	}
	row(tw, "model fit", fmt.Sprintf("%s: with %s of weights (%s); no reserve: the device was read after this process opened it (arenactl fit holds back 1 GiB for that)", model, human(r.ModelWeightBytes), source))
	row(tw, "arena", fmt.Sprintf("%s, %s layout, slabs: %d, built in %.2f ms",
		bytesAndHuman(r.ArenaBytes), r.Layout, r.Slabs, r.BuildMS))
	if r.WeightsBytes > 0 {
		row(tw, "weights", fmt.Sprintf("%s (%s allocated) loaded in %.1f ms, %.2f GB/s; each step read a window back and compared it with the file",
			bytesAndHuman(r.WeightsBytes), human(r.WeightsAllocatedBytes), r.WeightsLoadMS, r.WeightsLoadGBps))
	}
	built := "arena built"
	if r.WeightsBytes > 0 {
		built = "weights and arena built"
	}
	free := fmt.Sprintf("before %s, %s %s", human(r.DeviceFreeBefore), built, human(r.DeviceFreeBuilt))
	if r.DeviceFreeKV > 0 {
		free += fmt.Sprintf(", KV cache built %s", human(r.DeviceFreeKV))
	}
	row(tw, "device free", free+", after "+human(r.DeviceFreeAfter))
	if r.Served {
		row(tw, "kv cache", fmt.Sprintf("%s: %d paged blocks, %d sequences' sliding blocks and state, built in %.2f ms", bytesAndHuman(r.KVCacheBytes), r.KVBlocks, r.KVSeqs, r.KVBuildMS))
		row(tw, "served", fmt.Sprintf("%d of %d requests finished; %d preemptions; peak %d blocks in use; prefix cache %d hits of %d lookups, %d tokens saved; %d KV round trips",
			r.SequencesFinished, r.Requests, r.Preemptions, r.KVPeakUsedBlocks, r.PrefixHits, r.PrefixQueries, r.PrefixHitTokens, r.KVRoundTrips))
	}
	if k := r.Rank; k != nil {
		row(tw, "rank", fmt.Sprintf("%d of layout %s (%s; %d KV blocks on every rank): fit %s = weights %s + arena %s + KV %s; ledger %s (in 2 MiB pages %s); device lost %s",
			k.Rank, k.Layout, yesNo(k.LayoutFits, "the layout fits", "the layout DOES NOT FIT"), k.LayoutKVBlocks, bytesAndHuman(k.FitBytes),
			human(k.FitWeightBytes), human(k.FitArenaBytes), human(k.FitKVBytes), bytesAndHuman(k.LedgerBytes), bytesAndHuman(k.PagedBytes), bytesAndHuman(k.DeviceDropBytes)))
	}
	row(tw, "steps", fmt.Sprintf("%d in %.1f ms; step p50 %.0f µs, p99 %.0f µs, max %.0f µs", r.Steps, r.StepsWallMS, r.StepP50US, r.StepP99US, r.StepMaxUS))
	if t := computeText(&r.computeReport); t != "" {
		row(tw, "compute", t)
	}
	row(tw, "max concurrent forwards", r.MaxConcurrentForwards)
	row(tw, "backend threads", r.BackendThreads)
	for _, c := range r.SlabCarves {
		row(tw, "slab carve", fmt.Sprintf("%s: %d B at offset %d", c.Slab, c.Bytes, c.Offset))
	}
	row(tw, "release", fmt.Sprintf("%d allocations in %.2f ms; ledger after release %d B (peak %s)",
		r.ReleasedAllocations, r.ReleaseMS, r.LedgerBytesAfterRelease, human(r.LedgerPeakBytes)))
	row(tw, "goroutines", fmt.Sprintf("before %d, after %d", r.GoroutinesBefore, r.GoroutinesAfter))
	tw.Flush()
	if len(r.InvariantsFailed) == 0 {
		fmt.Fprintln(w, "\ninvariants: all hold")
		return
	}
	fmt.Fprintln(w, "\ninvariants FAILED:")
	for _, f := range r.InvariantsFailed {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}

// yesNo returns yes when b, else no.
func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// joinSemi joins ss with "; ".
func joinSemi(ss []string) string { return strings.Join(ss, "; ") }
