package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/examples/internal/memsvg"
)

// readSVG parses the bars of the SVG file at path.
func readSVG(t *testing.T, path string) map[string]memsvg.DrawnBar {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bars, err := memsvg.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]memsvg.DrawnBar{}
	for _, b := range bars {
		out[b.ID] = b
	}
	return out
}

// regionBytes checks every region of b is drawn BarWidth × bytes / scale
// wide and returns the bytes by region name.
func regionBytes(t *testing.T, b memsvg.DrawnBar) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	for _, r := range b.Regions {
		if want := memsvg.BarWidth * float64(r.Bytes) / float64(b.Scale); math.Abs(r.Width-want) > 1e-9 {
			t.Errorf("bar %s region %s: width %.9f for %d B of %d, want %.9f", b.ID, r.Name, r.Width, r.Bytes, b.Scale, want)
		}
		got[r.Name] += r.Bytes
	}
	return got
}

// The fit's picture draws the fit's bytes to scale: weights, arena and
// slabs, KV cache, reserve, others and free, summing to the device's
// total, and the arena's buffers summing to the plan's.
func TestFitSVGMatchesFit(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"fits", []string{"--device-used", "3GiB"}, exitOK},
		{"does not fit", []string{"--device-memory", "24GiB"}, exitNegative},
		{"cuda graphs inside the budget", []string{"--cuda-graphs", "estimated"}, exitOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fit.svg")
			args := append([]string{"fit", "--config", configPath("llama-3.1-8b"), "--json", "--svg", path}, c.args...)
			res := cli(t, args...)
			if res.code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", res.code, c.code, res.stderr)
			}
			var r arena.FitReport
			if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
				t.Fatal(err)
			}
			bars := readSVG(t, path)
			dev := bars["device"]
			got := regionBytes(t, dev)
			want := map[string]int64{
				memsvg.Weights: r.WeightBytes, memsvg.Arena: r.ArenaBytes + r.SlabBytes,
				memsvg.KVFree: r.KVCacheBytes + r.StateCacheBytes, memsvg.Reserve: r.ReserveBytes + r.SamplerBudgetBytes + r.CUDAGraphBytes,
				memsvg.Others: r.UsedByOthersBytes,
			}
			var held int64
			for name, n := range want {
				held += n
				if got[name] != n {
					t.Errorf("%s drawn with %d B, the fit has %d", name, got[name], n)
				}
			}
			if wantFree := max(r.Device.TotalBytes-held, 0); got[memsvg.Free] != wantFree {
				t.Errorf("free drawn with %d B, want %d", got[memsvg.Free], wantFree)
			}
			if dev.Total != r.Device.TotalBytes || dev.Scale != max(r.Device.TotalBytes, held) {
				t.Errorf("device bar total %d scale %d, want %d and %d", dev.Total, dev.Scale, r.Device.TotalBytes, max(r.Device.TotalBytes, held))
			}
			if (r.CUDAGraphs == arena.CUDAGraphsEstimated) != (r.CUDAGraphBytes > 0) {
				t.Errorf("cuda_graphs %s: %d B of graphs", r.CUDAGraphs, r.CUDAGraphBytes)
			}
			if r.Fits != (c.code == exitOK) || got[memsvg.Weights] != 16060522496 || got[memsvg.KVFree] == 0 {
				t.Errorf("fits %v, %d B of weights and %d B of KV cache drawn", r.Fits, got[memsvg.Weights], got[memsvg.KVFree])
			}
			var arenaSum int64
			for _, n := range regionBytes(t, bars["arena"]) {
				arenaSum += n
			}
			if arenaSum != bars["arena"].Total || arenaSum == 0 || arenaSum > r.ArenaBytes+r.SlabBytes {
				t.Errorf("arena buffers drawn: %d B of a bar of %d; the fit's arena and slabs are %d B", arenaSum, bars["arena"].Total, r.ArenaBytes+r.SlabBytes)
			}
		})
	}
}

// The plan's picture draws every present buffer and slab to scale,
// summing to the plan's total.
func TestPlanSVGMatchesPlan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan.svg")
	res := cli(t, "plan", "--config", configPath("deepseek-v3"), "--json", "--svg", path).mustSucceed(t)
	var p planJSON
	if err := json.Unmarshal([]byte(res.stdout), &p); err != nil {
		t.Fatal(err)
	}
	got := regionBytes(t, readSVG(t, path)["arena"])
	if len(got) != len(p.Buffers)+len(p.Slabs) {
		t.Errorf("%d regions drawn, the plan has %d buffers and %d slabs", len(got), len(p.Buffers), len(p.Slabs))
	}
	for _, b := range p.Buffers {
		if got[b.Name] != b.Bytes {
			t.Errorf("%s drawn with %d B, the plan has %d", b.Name, got[b.Name], b.Bytes)
		}
	}
	for _, s := range p.Slabs {
		if got[s.Name] != s.Bytes {
			t.Errorf("slab %s drawn with %d B, the plan has %d", s.Name, got[s.Name], s.Bytes)
		}
	}
}

// A parallel layout's picture has one device bar per rank.
func TestFitSVGRanks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ranks.svg")
	res := cli(t, "fit", "--config", configPath("llama-3.1-8b"), "--tensor-parallel-size", "2", "--json", "--svg", path)
	if res.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	var r arena.RankFitReport
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatal(err)
	}
	bars := readSVG(t, path)
	if len(bars) != 2 || len(r.Ranks) != 2 {
		t.Fatalf("%d bars for %d ranks, want 2", len(bars), len(r.Ranks))
	}
	for _, rk := range r.Ranks {
		got := regionBytes(t, bars[fmt.Sprintf("rank-%d", rk.Rank)])
		if got[memsvg.Weights] != rk.Report.WeightBytes || got[memsvg.KVFree] != rk.Report.KVCacheBytes+rk.Report.StateCacheBytes {
			t.Errorf("rank %d: weights %d B, KV %d B drawn; the fit has %d and %d", rk.Rank, got[memsvg.Weights], got[memsvg.KVFree], rk.Report.WeightBytes, rk.Report.KVCacheBytes+rk.Report.StateCacheBytes)
		}
	}
}
