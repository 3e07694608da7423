package main

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/examples/internal/memsvg"
)

// memoryView is what the page shows.
type memoryView struct {
	Device     string
	Total      int64
	Bar        template.HTML // memsvg.Inline of the device's bar
	Regions    []memsvg.Region
	Owners     []ownerRow
	Entries    []device.LedgerEntry
	Views      map[device.DevicePtr]int
	KVPath     string // the KV history's used line, SVG path data
	KVCached   string // its cached line
	KVSamples  int
	Taken      time.Time
	Refresh    int
	Counters   device.LedgerCounters
	LedgerSum  int64
	HistoryMin int
}

// ownerRow is one owner's bytes in the table.
type ownerRow struct {
	Owner         string
	Bytes, Peak   int64
	Human, PeakHu string
}

// memoryBar is the device's bar (memsvg.DeviceBar): the ledger's owners
// (weights; arena and slabs; the KV cache, split by its blocks' states in
// each group's proportion; the embedder's own owners), memory the ledger
// does not hold (other processes, the driver's own), and free memory.
// Its regions sum to total.
func memoryBar(l device.Ledger, kv device.KVStats, free, total int64) (memsvg.Bar, error) {
	var weights, arenaB, kvB, embedder int64
	for owner, u := range l.Owners {
		switch {
		case owner == device.WeightsOwner:
			weights += u.CurrentBytes
		case owner == device.ArenaOwner || strings.HasPrefix(owner, "slab/"):
			arenaB += u.CurrentBytes
		case owner == device.KVCacheOwner:
			kvB += u.CurrentBytes
		default:
			embedder += u.CurrentBytes
		}
	}
	var kvUsed, kvCached int64
	for _, g := range kv.Groups {
		var bytes int64
		for _, e := range l.Entries {
			if e.Owner == device.KVCacheOwner && e.Parent == 0 && e.Label == g.Name {
				bytes += e.Bytes
			}
		}
		if n := int64(g.Free + g.Cached + g.Used); n > 0 {
			kvUsed += bytes * int64(g.Used) / n
			kvCached += bytes * int64(g.Cached) / n
		}
	}
	return memsvg.DeviceBar("memory-bar", "", total, map[string]int64{
		memsvg.Weights: weights, memsvg.Arena: arenaB,
		memsvg.KVUsed: kvUsed, memsvg.KVCached: kvCached, memsvg.KVFree: kvB - kvUsed - kvCached,
		memsvg.Embedder: embedder, memsvg.Others: max(total-free-l.Counters.CurrentBytes, 0),
	})
}

// handleMemory serves GET /debug/memory: the device's memory drawn to
// scale, the KV cache's use over the last minutes, and the ledger.
func (s *server) handleMemory(w http.ResponseWriter, r *http.Request) {
	v, err := s.memoryView(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := memoryPage.Execute(w, v); err != nil {
		s.log.Warn("server: /debug/memory", "err", err)
	}
}

// memoryView reads the device, the ledger and the KV cache.
func (s *server) memoryView(ctx context.Context) (*memoryView, error) {
	free, total, err := s.m.MemInfo(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.m.Ledger(ctx)
	if err != nil {
		return nil, err
	}
	kv, err := s.m.KVStats(ctx)
	if err != nil {
		return nil, err
	}
	bar, err := memoryBar(l, kv, free, total)
	if err != nil {
		return nil, err
	}
	svg, err := memsvg.Inline(bar)
	if err != nil {
		return nil, err
	}
	v := &memoryView{Device: s.m.Device().Name, Total: total, Bar: svg, Regions: bar.Regions, Taken: l.Taken,
		Refresh: 2, Counters: l.Counters, HistoryMin: int(historyWindow / time.Minute), Views: map[device.DevicePtr]int{}}
	for o, u := range l.Owners {
		if u.CurrentBytes > 0 || u.PeakBytes > 0 {
			v.Owners = append(v.Owners, ownerRow{Owner: o, Bytes: u.CurrentBytes, Peak: u.PeakBytes, Human: arena.HumanBytes(u.CurrentBytes), PeakHu: arena.HumanBytes(u.PeakBytes)})
		}
	}
	slices.SortFunc(v.Owners, func(a, b ownerRow) int { return cmp.Compare(b.Bytes, a.Bytes) })
	for _, e := range l.Entries {
		if e.Parent != 0 {
			v.Views[e.Parent]++
			continue
		}
		v.Entries = append(v.Entries, e)
		v.LedgerSum += e.Bytes
	}
	v.KVPath, v.KVCached, v.KVSamples = historyPaths(s.history.snapshot(), time.Now())
	return v, nil
}

// historyPaths draws the KV history as two SVG paths over a 600×120 box:
// used blocks and used + cached blocks as fractions of the total, the
// last historyWindow from left to right.
func historyPaths(samples []kvSample, now time.Time) (used, cached string, n int) {
	var u, c strings.Builder
	for i, s := range samples {
		if s.Total == 0 {
			continue
		}
		x := 600 * (1 - now.Sub(s.At).Seconds()/historyWindow.Seconds())
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&u, "%s%.1f,%.1f ", cmd, x, 120*(1-float64(s.Used)/float64(s.Total)))
		fmt.Fprintf(&c, "%s%.1f,%.1f ", cmd, x, 120*(1-float64(s.Used+s.Cached)/float64(s.Total)))
	}
	return u.String(), c.String(), len(samples)
}

var memoryPage = template.Must(template.New("memory").Funcs(template.FuncMap{
	"human": arena.HumanBytes,
	"pct":   func(b, total int64) string { return fmt.Sprintf("%.2f%%", 100*float64(b)/float64(total)) },
	"age":   func(d time.Duration) string { return d.Round(time.Second).String() },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>gpuarena memory: {{.Device}}</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin-top: 28px; }
svg.bar { width: 100%; height: 56px; display: block; border: 1px solid #bbb; }
.legend span { display: inline-block; margin: 4px 14px 4px 0; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 5px; vertical-align: -1px; }
table { border-collapse: collapse; margin-top: 8px; }
td, th { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
svg.history { width: 600px; height: 120px; border: 1px solid #bbb; }
</style></head><body>
<h1>{{.Device}}: {{human .Total}} ({{.Total}} B)</h1>
{{.Bar}}
<div class="legend">
{{- range .Regions}}
<span data-legend="{{.Name}}"><i style="background: {{.Color}}"></i>{{.Title}}: {{human .Bytes}} ({{pct .Bytes $.Total}})</span>
{{- end}}
</div>
<h2>KV cache over the last {{.HistoryMin}} minutes ({{.KVSamples}} samples): used (red), used + cached (yellow)</h2>
<svg class="history" viewBox="0 0 600 120" preserveAspectRatio="none">
<path d="{{.KVCached}}" fill="none" stroke="#edc948" stroke-width="2"/>
<path d="{{.KVPath}}" fill="none" stroke="#e15759" stroke-width="2"/>
</svg>
<h2>Ledger by owner ({{human .Counters.CurrentBytes}} now, {{human .Counters.PeakBytes}} at most; {{.Counters.Allocations}} allocations, {{.Counters.Frees}} frees, {{.Counters.Failures}} refused)</h2>
<table id="owners"><tr><th>owner</th><th>bytes</th><th></th><th>peak</th></tr>
{{- range .Owners}}
<tr><td>{{.Owner}}</td><td class="n">{{.Bytes}}</td><td class="n">{{.Human}}</td><td class="n">{{.PeakHu}}</td></tr>
{{- end}}
</table>
<h2>Allocations (taken {{.Taken.Format "15:04:05.000"}})</h2>
<table id="ledger"><tr><th>label</th><th>owner</th><th>bytes</th><th></th><th>pointer</th><th>views</th><th>age</th></tr>
{{- range .Entries}}
<tr data-owner="{{.Owner}}" data-bytes="{{.Bytes}}"><td>{{.Label}}</td><td>{{.Owner}}</td><td class="n">{{.Bytes}}</td><td class="n">{{human .Bytes}}</td><td>{{printf "%#x" .Ptr}}</td><td class="n">{{index $.Views .Ptr}}</td><td>{{age .Age}}</td></tr>
{{- end}}
<tr><th>total</th><th></th><th class="n" id="ledger-sum">{{.LedgerSum}}</th><th class="n">{{human .LedgerSum}}</th><th></th><th></th><th></th></tr>
</table>
</body></html>
`))
