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

	ModelType           string      `json:"model_type"`
	Config              string      `json:"config"`
	Backend             string      `json:"backend"`
	Device              string      `json:"device"`
	DeviceTotalBytes    int64       `json:"device_total_bytes"`
	BudgetBytes         int64       `json:"budget_bytes"`
	Layout              string      `json:"layout"`
	ExpectedArenaBytes  int64       `json:"expected_arena_bytes"`
	Fits                bool        `json:"fits"`
	KVBlocks            int64       `json:"kv_blocks"`
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
	// The weights of --model: their bytes, what their load allocated, how
	// long it took and its rate (10^9 B/s); all 0 without --model.
	WeightsBytes          int64    `json:"weights_bytes,omitempty"`
	WeightsAllocatedBytes int64    `json:"weights_allocated_bytes,omitempty"`
	WeightsLoadMS         float64  `json:"weights_load_ms,omitempty"`
	WeightsLoadGBps       float64  `json:"weights_load_gbps,omitempty"`
	InvariantsFailed      []string `json:"invariants_failed"`
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
	if r.DeviceFreeAfter != r.DeviceFreeBefore {
		r.failed(fmt.Sprintf("device_free_after is %d, want device_free_before %d", r.DeviceFreeAfter, r.DeviceFreeBefore))
	}
	r.SlabCarves = nonNil(r.SlabCarves)
	r.InvariantsFailed = nonNil(r.InvariantsFailed)
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
	fmt.Fprintf(w, "run %s (%s) on %s %q: %d steps from %d clients\n\n", r.ModelType, r.Config, r.Backend, r.Device, r.Steps, r.Clients)
	tw := newTable(w)
	what := "preflight fit of the arena (weights and reserve left out)"
	if r.WeightsBytes > 0 {
		what = "preflight of the weights and the arena (Manager.Preflight)"
	}
	row(tw, "device", fmt.Sprintf("%s total, budget %s, %s: %s (%d KV blocks)",
		human(r.DeviceTotalBytes), human(r.BudgetBytes), what, yesNo(r.Fits, "fits", "does not fit"), r.KVBlocks))
	row(tw, "arena", fmt.Sprintf("%s, %s layout, slabs: %d, built in %.2f ms",
		bytesAndHuman(r.ArenaBytes), r.Layout, r.Slabs, r.BuildMS))
	if r.WeightsBytes > 0 {
		row(tw, "weights", fmt.Sprintf("%s (%s allocated) loaded in %.1f ms, %.2f GB/s; each step read a window back and compared it with the file",
			bytesAndHuman(r.WeightsBytes), human(r.WeightsAllocatedBytes), r.WeightsLoadMS, r.WeightsLoadGBps))
	}
	row(tw, "device free", fmt.Sprintf("before %s, built %s, after %s", human(r.DeviceFreeBefore), human(r.DeviceFreeBuilt), human(r.DeviceFreeAfter)))
	row(tw, "steps", fmt.Sprintf("%d in %.1f ms; step p50 %.0f µs, p99 %.0f µs, max %.0f µs", r.Steps, r.StepsWallMS, r.StepP50US, r.StepP99US, r.StepMaxUS))
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
