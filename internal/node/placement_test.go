package node

import (
	"fmt"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/internal/nodepb"
)

// machineInventory is the inventory of an empty node of count devices of
// preset, at address.
func machineInventory(t *testing.T, address, preset string, count int) *nodepb.Inventory {
	t.Helper()
	p, err := arena.LookupDevicePreset(preset)
	if err != nil {
		t.Fatal(err)
	}
	inv := &nodepb.Inventory{Address: address, MemberId: "m-" + address}
	for i := range count {
		inv.Devices = append(inv.Devices, &nodepb.DeviceInventory{Index: int32(i), Name: p.Device,
			TotalBytes: p.TotalBytes, FreeBytes: p.TotalBytes})
	}
	return inv
}

func TestPlaceDeepSeekV3AcrossNodes(t *testing.T) {
	cfg, err := arena.LoadConfig("../../examples/configs/deepseek-v3.json")
	if err != nil {
		t.Fatal(err)
	}
	invs := []*nodepb.Inventory{
		machineInventory(t, "10.0.0.1:7700", "h200", 8),
		machineInventory(t, "10.0.0.2:7700", "h200", 8),
		machineInventory(t, "10.0.0.3:7700", "h100-80gb", 4),
	}
	for _, tc := range []struct {
		name   string
		weight arena.DType
		want   string // the best placement: layout and stages' nodes
	}{
		{"fp8 checkpoint: one node", 0, "t=8 p=1 d=1 [10.0.0.1:7700]"},
		{"bf16: two nodes", arena.BF16, "t=8 p=2 d=1 [10.0.0.1:7700 10.0.0.2:7700]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fo := arena.FitOptions{Weights: arena.WeightOptions{DType: tc.weight}}
			got, err := Place(cfg, arena.DefaultOptions(), fo, PlaceOptions{TensorParallelSize: 8}, invs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				t.Fatal("nothing fits")
			}
			best := got[0]
			var nodes []string
			for _, s := range best.Stages {
				nodes = append(nodes, s.Address)
				if len(s.Devices) != 8 {
					t.Fatalf("stage on %s has %d devices, want 8", s.Address, len(s.Devices))
				}
			}
			if s := fmt.Sprintf("%s %v", best.Layout, nodes); s != tc.want {
				t.Fatalf("best placement %s, want %s", s, tc.want)
			}
			if !best.Fit.Fits || best.Fit.KVTokens <= 0 || len(best.Fit.Ranks) != 8*len(best.Stages) {
				t.Fatalf("fit %+v: want fits with KV tokens and one rank per device", best.Fit)
			}
			for _, p := range got {
				for _, s := range p.Stages {
					if s.Address == "10.0.0.3:7700" {
						t.Fatalf("a TP8 placement uses the 4-GPU node: %v", p.Stages)
					}
				}
			}
		})
	}
}

func TestPlaceUsesFreeMemory(t *testing.T) {
	cfg, err := arena.LoadConfig("../../examples/configs/llama-3.1-8b.json")
	if err != nil {
		t.Fatal(err)
	}
	a := machineInventory(t, "a:1", "h100-80gb", 2)
	b := machineInventory(t, "b:1", "h100-80gb", 2)
	a.Devices[0].FreeBytes = 1 << 30 // someone holds almost all of a's device 0
	got, err := Place(cfg, arena.DefaultOptions(), arena.FitOptions{}, PlaceOptions{TensorParallelSize: 2}, []*nodepb.Inventory{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Stages[0].Address != "b:1" {
		t.Fatalf("TP2 placement %v: want node b first (a's device 0 is nearly full)", got)
	}
	for _, p := range got {
		if len(p.Stages) == 1 && p.Stages[0].Address == "a:1" {
			t.Fatalf("TP2 on a fits with device 0 nearly full: %+v", p.Fit)
		}
	}
}
