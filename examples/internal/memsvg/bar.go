package memsvg

import (
	"fmt"

	"github.com/gpuarena/gpuarena/arena"
)

// BarWidth is a bar's width in SVG user units; a region's Width is
// BarWidth × Bytes / Bar.Scale.
const BarWidth = 1000

// BarHeight is a bar's height in SVG user units.
const BarHeight = 56

// Region names of a device bar: what holds each part of the device's
// memory.
const (
	Weights  = "weights"   // the loaded checkpoint (device.WeightsOwner)
	Arena    = "arena"     // the arena's buffers and the slabs
	KVUsed   = "kv_used"   // KV blocks in a running sequence's table
	KVCached = "kv_cached" // free KV blocks that hold a cached prefix
	KVFree   = "kv_free"   // KV blocks holding nothing
	Embedder = "embedder"  // the embedding program's own allocations
	Reserve  = "reserve"   // held back for the CUDA context, workspaces, graphs and the sampler pass
	Others   = "others"    // other processes and the driver
	Free     = "free"      // free memory
)

// kinds is each device region's title and colour (Tableau 10).
var kinds = map[string]struct{ title, color string }{
	Weights:  {"weights", "#4e79a7"},
	Arena:    {"arena buffers and slabs", "#f28e2b"},
	KVUsed:   {"KV cache: used", "#e15759"},
	KVCached: {"KV cache: cached prefixes", "#edc948"},
	KVFree:   {"KV cache: free", "#f6c6c7"},
	Embedder: {"the embedder's allocations", "#76b7b2"},
	Reserve:  {"reserve (CUDA context, workspaces, CUDA graphs, sampler pass)", "#b07aa1"},
	Others:   {"other processes and the driver", "#9c755f"},
	Free:     {"free", "#e8e8e8"},
}

// palette colours an arena bar's buffers, in turn.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// Region is one part of a bar: Bytes of memory drawn Width units wide at
// X (both in units of BarWidth, set by NewBar).
type Region struct {
	// Name is a device region's name (Weights, Arena, …) or a buffer's
	// name (arena.BufferID.String(), a slab's name).
	Name  string
	Title string
	Color string
	Bytes int64
	// X and Width place the region on the bar, in [0, BarWidth].
	X, Width float64
}

// Marker is a vertical line across a bar at Bytes from its left end: the
// device's budget under gpu_memory_utilization, or the device's end when
// the regions pass it.
type Marker struct {
	Title string
	Bytes int64
	X     float64
}

// Bar is one bar of the picture.
type Bar struct {
	// ID is the bar's SVG element id ("memory-bar" on the server's page).
	ID string
	// Caption is the line written above the bar in a standalone file.
	Caption string
	// Total is the memory the bar stands for (a device's total, an
	// arena's bytes); Scale is the bytes its width stands for:
	// max(Total, the regions' sum), so that regions past a device's end
	// (a fit that does not fit) are drawn to the same scale.
	Total, Scale int64
	Regions      []Region
	Markers      []Marker
}

// DeviceRegion returns the device region name (Weights, Arena, …) of
// bytes, titled and coloured. Errors: an unknown name.
func DeviceRegion(name string, bytes int64) (Region, error) {
	k, ok := kinds[name]
	if !ok {
		return Region{}, fmt.Errorf("memsvg: region %q: want weights, arena, kv_used, kv_cached, kv_free, embedder, reserve, others or free", name)
	}
	return Region{Name: name, Title: k.title, Color: k.color, Bytes: bytes}, nil
}

// DeviceBar returns the bar of a device of total bytes held as bytes says
// (by device region name: Weights, Arena, KVUsed, …; absent names hold
// 0), in the regions' fixed order, with Free the rest (0 when the others
// pass total), and markers (a budget) across it. Errors: an unknown name, a negative count or total ≤ 0.
func DeviceBar(id, caption string, total int64, bytes map[string]int64, markers ...Marker) (Bar, error) {
	if total <= 0 {
		return Bar{}, fmt.Errorf("memsvg: device bar %q: total %d B, want > 0", id, total)
	}
	var regions []Region
	var held int64
	for name, n := range bytes {
		if _, ok := kinds[name]; !ok || name == Free {
			return Bar{}, fmt.Errorf("memsvg: device bar %q: region %q: want weights, arena, kv_used, kv_cached, kv_free, embedder, reserve or others", id, name)
		}
		if n < 0 {
			return Bar{}, fmt.Errorf("memsvg: device bar %q: region %q holds %d B, want ≥ 0", id, name, n)
		}
		held += n
	}
	for _, name := range []string{Weights, Arena, KVUsed, KVCached, KVFree, Embedder, Reserve, Others} {
		r, _ := DeviceRegion(name, bytes[name])
		regions = append(regions, r)
	}
	free, _ := DeviceRegion(Free, max(total-held, 0))
	return NewBar(id, caption, total, append(regions, free), markers...), nil
}

// ArenaBar returns the bar of plan's arena: one region per present buffer
// and one per slab, in allocation order, over the plan's TotalBytes.
func ArenaBar(id, caption string, p *arena.Plan) Bar {
	var regions []Region
	for _, b := range p.Buffers {
		if b.Present() {
			regions = append(regions, Region{Name: b.ID.String(), Title: fmt.Sprintf("%s %s %v", b.ID, b.DType, b.Shape), Bytes: b.Bytes})
		}
	}
	for _, s := range p.Slabs {
		regions = append(regions, Region{Name: s.Name, Title: s.Name + " (slab)", Bytes: s.Bytes})
	}
	for i := range regions {
		regions[i].Color = palette[i%len(palette)]
	}
	return NewBar(id, caption, p.TotalBytes, regions)
}

// NewBar lays regions out left to right over max(total, their sum) and
// returns the bar; markers get their X.
func NewBar(id, caption string, total int64, regions []Region, markers ...Marker) Bar {
	var sum int64
	for _, r := range regions {
		sum += r.Bytes
	}
	b := Bar{ID: id, Caption: caption, Total: total, Scale: max(total, sum, 1), Regions: regions, Markers: markers}
	x := 0.0
	for i := range b.Regions {
		b.Regions[i].X = x
		b.Regions[i].Width = b.x(b.Regions[i].Bytes)
		x += b.Regions[i].Width
	}
	if sum > total {
		b.Markers = append(b.Markers, Marker{Title: fmt.Sprintf("the device's end: %s", arena.HumanBytes(total)), Bytes: total})
	}
	for i := range b.Markers {
		b.Markers[i].X = b.x(b.Markers[i].Bytes)
	}
	return b
}

// x is bytes in units of BarWidth.
func (b Bar) x(bytes int64) float64 { return BarWidth * float64(bytes) / float64(b.Scale) }
