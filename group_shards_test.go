package gpuarena_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/modelgen"
)

// fileSlice is the bytes of shard s as the file holds them: its byte
// ranges of the checkpoint's tensor, back to back, read with os.ReadFile.
func fileSlice(t *testing.T, ck *checkpoint.Checkpoint, s arena.TensorShard) []byte {
	t.Helper()
	ct, ok := ck.Tensor(s.Name)
	if !ok {
		t.Fatalf("%s not in the checkpoint", s.Name)
	}
	raw, err := os.ReadFile(ct.File)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, r := range s.ByteRanges() {
		out = append(out, raw[ct.Offset+r.Offset:ct.Offset+r.Offset+r.Bytes]...)
	}
	return out
}

// deviceTensors reads every tensor of w back from m's device (m's arena
// built: Forward needs one), by name.
func deviceTensors(t *testing.T, m *gpuarena.Manager, w *device.Weights) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	if _, err := m.Forward(context.Background(), func(_ *device.Arena, dev device.Device) error {
		for _, wt := range w.Tensors {
			buf := make([]byte, wt.Bytes)
			if err := dev.CopyDtoH(buf, wt.Ptr); err != nil {
				return err
			}
			got[wt.Name] = buf
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// Every rank of a 2- and 4-device group holds exactly its slice of every
// tensor of one generated checkpoint (a Gated DeltaNet's and a Mamba-2
// mixer's sections too), and its ledger exactly its shard's pooled bytes.
func TestGroupLoadWeightsSharded(t *testing.T) {
	for _, tc := range []struct {
		config string
		layout arena.ParallelLayout
	}{
		{"tiny-llama.json", arena.ParallelLayout{TensorParallelSize: 2}},
		{"tiny-llama.json", arena.ParallelLayout{TensorParallelSize: 4}}, // KV heads 2: replicated
		{"tiny-llama.json", arena.ParallelLayout{TensorParallelSize: 2, PipelineParallelSize: 2}},
		{"tiny-qwen3-moe.json", arena.ParallelLayout{TensorParallelSize: 2}},
		{"tiny-qwen3-moe.json", arena.ParallelLayout{TensorParallelSize: 4, EnableExpertParallel: true}},
		{"tiny-qwen3-moe.json", arena.ParallelLayout{TensorParallelSize: 2, DataParallelSize: 2, EnableExpertParallel: true}},
		// Gated DeltaNet: conv1d in three sections; vocab 1000 padded to 1024.
		{"tiny-qwen3-next.json", arena.ParallelLayout{TensorParallelSize: 2}},
		{"tiny-qwen3-next.json", arena.ParallelLayout{TensorParallelSize: 4, EnableExpertParallel: true}},
		// Mamba-2: in_proj in five sections, conv1d weight and bias in three.
		{"tiny-nemotron-h.json", arena.ParallelLayout{TensorParallelSize: 2}},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.config, tc.layout), func(t *testing.T) {
			res := modelgen.ForTest(t, "internal/modelgen/testdata/"+tc.config, modelgen.Options{Seed: 3, ShardBytes: 300_000})
			n := int(tc.layout.GPUs())
			g, _ := newMachineGroup(t, machine(n, 0))
			ws, err := g.LoadWeightsSharded(context.Background(), res.Dir, tc.layout, arena.WeightOptions{}, gpuarena.WithLoadChunkBytes(64<<10), gpuarena.WithLoadReaders(3))
			if err != nil {
				t.Fatal(err)
			}
			ck, err := checkpoint.Open(res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			cfg, err := arena.LoadConfig(res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			rankPlans, err := arena.PlanRanks(cfg, arena.Options{}, arena.WeightOptions{}, tc.layout)
			if err != nil {
				t.Fatal(err)
			}
			ledgers, err := g.Ledgers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.BuildArenas(context.Background(), plans(n)); err != nil { // Forward needs one
				t.Fatal(err)
			}
			for r := range n {
				shards, err := arena.RankShards(cfg, arena.WeightOptions{}, tc.layout, int64(r))
				if err != nil {
					t.Fatal(err)
				}
				var sizes []int64
				var sum int64
				for _, s := range shards {
					if s.Kind != arena.ShardAbsent {
						sizes = append(sizes, s.RankBytes())
						sum += s.RankBytes()
					}
				}
				if sum != rankPlans[r].Weights.CheckpointBytes || ws[r].Bytes != sum {
					t.Errorf("rank %d: shards %d B, loaded %d B, PlanRanks %d B", r, sum, ws[r].Bytes, rankPlans[r].Weights.CheckpointBytes)
				}
				pooled, err := arena.PooledBytes(sizes)
				if err != nil {
					t.Fatal(err)
				}
				if got := ledgers[r].BytesByOwner()[device.WeightsOwner]; got != pooled {
					t.Errorf("rank %d: ledger holds %d B of weights, want %d", r, got, pooled)
				}
				got := deviceTensors(t, g.Rank(r), ws[r])
				held := 0
				for _, s := range shards {
					if s.Kind == arena.ShardAbsent {
						if _, ok := got[s.Name]; ok {
							t.Errorf("rank %d holds %s, absent from its shard", r, s.Name)
						}
						continue
					}
					held++
					want := fileSlice(t, ck, s)
					if !bytes.Equal(got[s.Name][:len(want)], want) {
						t.Errorf("rank %d: %s (%v [%d, +%d)) differs from the file's slice", r, s.Name, s.Kind, s.Start, s.Len)
					}
				}
				if held != len(got) {
					t.Errorf("rank %d: %d tensors on the device, %d in its shard", r, len(got), held)
				}
			}
		})
	}
}

// A load cancelled part-way, or failing on one rank, leaves no weights on
// any rank.
func TestGroupLoadWeightsShardedAllOrNothing(t *testing.T) {
	res := modelgen.ForTest(t, "internal/modelgen/testdata/tiny-llama.json", modelgen.Options{Seed: 1})
	layout := arena.ParallelLayout{TensorParallelSize: 4}
	weightBytes := func(g *gpuarena.Group) []int64 {
		ls, err := g.Ledgers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int64, len(ls))
		for r, l := range ls {
			out[r] = l.BytesByOwner()[device.WeightsOwner]
		}
		return out
	}
	t.Run("cancelled", func(t *testing.T) {
		g, _ := newMachineGroup(t, machine(4, 0))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var chunks atomic.Int64 // every rank reports on its own goroutine
		_, err := g.LoadWeightsSharded(ctx, res.Dir, layout, arena.WeightOptions{}, gpuarena.WithLoadChunkBytes(16<<10),
			gpuarena.WithLoadProgress(func(device.LoadProgress) {
				if chunks.Add(1) == 3 {
					cancel()
				}
			}))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		for r, b := range weightBytes(g) {
			if b != 0 {
				t.Errorf("rank %d holds %d B of weights after a cancelled load", r, b)
			}
		}
	})
	t.Run("rank 2 out of memory", func(t *testing.T) {
		c := machine(4, 0)
		c.Devices[2].TotalBytes = 1 << 20 // below its shard
		g, _ := newMachineGroup(t, c)
		_, err := g.LoadWeightsSharded(context.Background(), res.Dir, layout, arena.WeightOptions{})
		var re *gpuarena.RankError
		if !errors.As(err, &re) || re.Rank != 2 || !errors.Is(err, gpuarena.ErrOutOfMemory) {
			t.Fatalf("err = %v, want rank 2's ErrOutOfMemory", err)
		}
		for r, b := range weightBytes(g) {
			if b != 0 {
				t.Errorf("rank %d holds %d B of weights after rank 2 failed", r, b)
			}
		}
	})
	t.Run("layout of other GPUs", func(t *testing.T) {
		g, _ := newMachineGroup(t, machine(2, 0))
		if _, err := g.LoadWeightsSharded(context.Background(), res.Dir, layout, arena.WeightOptions{}); !errors.Is(err, gpuarena.ErrInvalidValue) {
			t.Fatalf("err = %v, want ErrInvalidValue", err)
		}
	})
}
