package memsvg

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// checkWidths fails unless every drawn region of b is BarWidth × bytes /
// scale wide, starts where the previous one ended, and they sum to sum.
func checkWidths(t *testing.T, b DrawnBar, sum int64) {
	t.Helper()
	var got int64
	x := 0.0
	for _, r := range b.Regions {
		want := BarWidth * float64(r.Bytes) / float64(b.Scale)
		if math.Abs(r.Width-want) > 1e-9 || math.Abs(r.X-x) > 1e-6 {
			t.Errorf("bar %s region %s: x %.6f width %.6f for %d B of %d; want x %.6f width %.6f", b.ID, r.Name, r.X, r.Width, r.Bytes, b.Scale, x, want)
		}
		x += r.Width
		got += r.Bytes
	}
	if got != sum {
		t.Errorf("bar %s: regions sum to %d B, want %d", b.ID, got, sum)
	}
}

func TestDeviceBarToScale(t *testing.T) {
	const total = 150_109_880_320
	held := map[string]int64{Weights: 16_060_522_496, Arena: 3_081_336_832, KVUsed: 1 << 30, KVCached: 3 << 20, KVFree: 100 << 30, Others: 900 << 20}
	b, err := DeviceBar("device", "an H200", total, held, Marker{Title: "budget", Bytes: total * 9 / 10})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteDocument(&buf, "test", b); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	drawn, err := Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(drawn) != 1 || drawn[0].Total != total || drawn[0].Scale != total {
		t.Fatalf("parsed %+v, want one bar of %d B", drawn, total)
	}
	checkWidths(t, drawn[0], total)
	byName := map[string]int64{}
	for _, r := range drawn[0].Regions {
		byName[r.Name] = r.Bytes
	}
	for name, n := range held {
		if byName[name] != n {
			t.Errorf("%s drawn with %d B, want %d", name, byName[name], n)
		}
	}
	var sum int64
	for _, n := range held {
		sum += n
	}
	if byName[Free] != total-sum {
		t.Errorf("free drawn with %d B, want %d", byName[Free], total-sum)
	}
	if !strings.Contains(doc, `class="marker" data-bytes="135098892288"`) || b.Markers[0].X != 900 {
		t.Errorf("budget marker at %v, want 900", b.Markers[0].X)
	}
}

// Regions past the device's end are drawn to the same scale, the
// device's end marked, nothing free.
func TestDeviceBarOverTotal(t *testing.T) {
	b, err := DeviceBar("device", "", 100, map[string]int64{Weights: 150, Arena: 50})
	if err != nil {
		t.Fatal(err)
	}
	if b.Scale != 200 || len(b.Markers) != 1 || b.Markers[0].X != BarWidth/2 {
		t.Fatalf("scale %d, markers %+v; want 200 and the device's end at %d", b.Scale, b.Markers, BarWidth/2)
	}
	if r := b.Regions[len(b.Regions)-1]; r.Name != Free || r.Bytes != 0 || b.Regions[0].Width != 750 {
		t.Errorf("regions %+v: want weights 750 wide and nothing free", b.Regions)
	}
}

func TestDeviceBarRefusesBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		total int64
		held  map[string]int64
	}{
		"unknown region": {100, map[string]int64{"gpu": 1}},
		"free given":     {100, map[string]int64{Free: 1}},
		"negative":       {100, map[string]int64{Weights: -1}},
		"zero total":     {0, nil},
	} {
		if _, err := DeviceBar("d", "", c.total, c.held); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := DeviceRegion("gpu", 1); err == nil {
		t.Error("DeviceRegion(gpu): no error")
	}
}

// The server's page and a standalone file draw the same rects.
func TestInlineMatchesDocument(t *testing.T) {
	cfg, err := arena.LoadConfig("../../configs/qwen3-0.6b.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	b := ArenaBar("arena", "qwen3", p)
	html, err := Inline(b)
	if err != nil {
		t.Fatal(err)
	}
	inline, err := Parse(strings.NewReader(string(html)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteDocument(&buf, "plan", b); err != nil {
		t.Fatal(err)
	}
	doc, err := Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(inline) != 1 || len(doc) != 1 || len(inline[0].Regions) != len(doc[0].Regions) || len(doc[0].Regions) < 10 {
		t.Fatalf("inline %+v, document %+v: want one bar each with the same regions", inline, doc)
	}
	for i := range doc[0].Regions {
		if inline[0].Regions[i] != doc[0].Regions[i] {
			t.Errorf("region %d: inline %+v, document %+v", i, inline[0].Regions[i], doc[0].Regions[i])
		}
	}
	checkWidths(t, doc[0], p.TotalBytes)
}
