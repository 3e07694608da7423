package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// run --devices on hostsim: one rank per simulated device, each with its
// own thread, the same steps, the arena's bytes, nothing after the release.
func TestRunGroupJSON(t *testing.T) {
	for _, tc := range []struct {
		name, devices, tp string
		n                 int
		total             int64
		source            string
	}{
		{"8xh200", "8xh200", "1", 8, arena.H200TotalBytes, "the same plan on every rank"},
		{"2", "2", "1", 2, arena.H200TotalBytes, "the same plan on every rank"},
		{"tp2 h100", "2xh100-80gb", "2", 2, 85_045_477_376, "arena.PlanRanks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, "run", "--config", configPath("llama-3.1-8b"), "--json", "--steps", "40", "--clients", "8",
				"--devices", tc.devices, "--tensor-parallel-size", tc.tp).mustSucceed(t)
			var rep groupReport
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Devices != tc.n || len(rep.Ranks) != tc.n || rep.Steps != 40 || rep.PlanSource != tc.source || len(rep.InvariantsFailed) != 0 {
				t.Fatalf("devices %d, ranks %d, steps %d, plan source %q, failed %v; want %d, %d, 40, %q, none",
					rep.Devices, len(rep.Ranks), rep.Steps, rep.PlanSource, rep.InvariantsFailed, tc.n, tc.n, tc.source)
			}
			for i, k := range rep.Ranks {
				if k.Ordinal != i || k.TotalBytes != tc.total || k.ArenaBytes != k.ExpectedArenaBytes || k.ArenaBytes == 0 ||
					k.BackendThreads != 1 || k.Steps != 40 || k.LedgerBytesAfterRelease != 0 {
					t.Errorf("rank %d: %+v", i, k)
				}
			}
			if tc.tp == "2" && rep.Ranks[0].PlanBytes == planOf(t, "llama-3.1-8b").TotalBytes {
				t.Errorf("rank 0's plan under tensor_parallel_size 2 is the one-GPU plan's %d B", rep.Ranks[0].PlanBytes)
			}
		})
	}
}

func TestRunGroupRefusesBadDevices(t *testing.T) {
	for _, args := range [][]string{
		{"--devices", "0"},
		{"--devices", "3xfoo"},
		{"--devices", "2", "--device-memory", "1GiB"},
		{"--devices", "2", "--tensor-parallel-size", "4"},
		{"--devices", "2", "--kv"},
	} {
		r := cli(t, append([]string{"run", "--config", configPath("llama-3.1-8b")}, args...)...)
		if r.code == exitOK || !strings.Contains(r.stderr, "--") {
			t.Errorf("%v: exit %d, stderr %q; want an error naming the flag", args, r.code, r.stderr)
		}
	}
}
