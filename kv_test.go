package gpuarena_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/kvcache"
)

// kvManager builds gpt-oss-20b's arena and a KV cache of blocks paged
// blocks and seqs sequences (full attention and a sliding window of 128).
func kvManager(t *testing.T, blocks, seqs int64) (*gpuarena.Manager, *arena.Plan, *device.Arena, *device.KVCache) {
	t.Helper()
	ctx := context.Background()
	m, _ := countingManager(t, 0)
	cfg, plan, fit := kvFit(t, m, "gpt-oss-20b.json", arena.Options{MaxBatchTokens: 512, MaxSeqLen: 4096})
	a, err := m.BuildArena(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := m.BuildKVCache(ctx, kvSpec(t, cfg, fit, arena.KVCacheRequest{Blocks: &blocks, Seqs: &seqs}))
	if err != nil {
		t.Fatal(err)
	}
	return m, plan, a, kv
}

func tokens(from, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(from + i)
	}
	return t
}

// A scheduler step through the manager: admissions share a cached prefix,
// an append grows a sequence, the block tables a step copies into the
// arena's scratch buffer read back as the pool holds them, the counts add
// up, and exhaustion is a typed refusal that changes nothing.
func TestKVStepThroughTheManager(t *testing.T) {
	ctx := context.Background()
	m, plan, _, kv := kvManager(t, 40, 4)
	if len(kv.Groups) != 2 || kv.Groups[0].Name != arena.KVGroupFullAttention || kv.Groups[1].Name != arena.KVGroupSlidingWindow {
		t.Fatalf("groups %v, want full attention and sliding window", kv.Groups)
	}
	shared := tokens(0, 64)
	r, err := m.KVStep(ctx, kvcache.Step{Admit: []kvcache.Admit{
		{Seq: 1, Tokens: append(append([]int32{}, shared...), tokens(1000, 36)...)},
		{Seq: 2, Tokens: append(append([]int32{}, shared...), tokens(2000, 20)...)},
	}})
	if err != nil || len(r.Errors) != 0 {
		t.Fatalf("admit: %v %v", err, r.Errors)
	}
	if r.CachedTokens[0] != 0 || r.CachedTokens[1] != 64 {
		t.Fatalf("cached tokens %v, want [0 64]: the second prompt shares the first's 4 full blocks", r.CachedTokens)
	}
	if r, err = m.KVStep(ctx, kvcache.Step{Append: []kvcache.Append{{Seq: 1, Tokens: tokens(5000, 1)}}}); err != nil || len(r.Errors) != 0 {
		t.Fatalf("append: %v %v", err, r.Errors)
	}
	tbl, err := m.KVBlockTable(ctx, 1)
	if err != nil || len(tbl[0]) != 7 { // 101 tokens in blocks of 16
		t.Fatalf("sequence 1's tables %v (%v), want 7 full-attention blocks", tbl, err)
	}
	st, err := m.KVStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := st.Groups[0]; g.Used != 7+2 || g.Free+g.Cached+g.Used != g.Total || g.Total != 39 || st.Sequences != 2 || st.Prefix.HitTokens != 64 {
		t.Fatalf("stats %+v: want 9 blocks used of 39 (block 0 is the null block), 2 sequences, 64 tokens hit", st)
	}

	meta := plan.DecodeMeta
	shape := kvcache.TableShape{Rows: int(meta.Rows), Width: int(meta.BlockTableWidth)}
	enc := make([]byte, meta.BlockTables.Bytes)
	if err := m.KVBlockTables(ctx, 0, shape, []kvcache.SeqID{2, 1}, enc); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(enc))
	if _, err := m.Forward(ctx, func(sa *device.Arena, dev device.Device) error {
		at := sa.Ptrs[arena.Scratch] + device.DevicePtr(meta.BlockTables.Offset)
		if err := dev.CopyHtoD(at, enc); err != nil {
			return err
		}
		return dev.CopyDtoH(back, at)
	}); err != nil {
		t.Fatal(err)
	}
	row1 := back[shape.Width*4 : shape.Width*4+len(tbl[0])*4]
	for i, b := range tbl[0] {
		if got := int32(binary.LittleEndian.Uint32(row1[4*i:])); got != b {
			t.Fatalf("scratch block_tables row 1 entry %d = %d, the pool says %d", i, got, b)
		}
	}
	if !bytes.Equal(back, enc) {
		t.Fatal("the block tables read back from scratch differ from those written")
	}
	// The same tables come back with a step (Step.Tables): one round trip.
	withStep := make([]byte, len(enc))
	if r, err := m.KVStep(ctx, kvcache.Step{Tables: &kvcache.TableRequest{Group: 0, Shape: shape, Batch: []kvcache.SeqID{2, 1}, Dst: withStep}}); err != nil || r.TablesErr != nil || !bytes.Equal(withStep, enc) {
		t.Fatalf("tables with a step: %v, %v; want the bytes KVBlockTables wrote", err, r.TablesErr)
	}

	// 39 usable blocks, 9 used: a prompt of 40 blocks cannot be admitted;
	// the tables asked with the step leave it out.
	clear(withStep)
	r, err = m.KVStep(ctx, kvcache.Step{Admit: []kvcache.Admit{{Seq: 3, Tokens: tokens(9000, 640)}},
		Tables: &kvcache.TableRequest{Group: 0, Shape: shape, Batch: []kvcache.SeqID{3, 1}, Dst: withStep}})
	var ex *kvcache.ExhaustedError
	if err != nil || len(r.Errors) != 1 || !errors.As(r.Errors[0].Err, &ex) || ex.Group != 0 || ex.Asked != 40 {
		t.Fatalf("a prompt of 40 blocks: %v %v, want an *ExhaustedError asking 40 blocks of group 0", err, r.Errors)
	}
	if r.TablesErr != nil || !bytes.Equal(withStep[:shape.Width*4], enc[shape.Width*4:2*shape.Width*4]) {
		t.Fatalf("tables with a refused admission: %v; want row 0 to be sequence 1's", r.TablesErr)
	}
	if st2, _ := m.KVStats(ctx); st2.Sequences != 2 || st2.Groups[0].Used != 9 {
		t.Fatalf("after the refusal: %+v, want nothing changed", st2)
	}
	if err := m.KVCheck(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.ResetPrefixCache(ctx); !errors.Is(err, kvcache.ErrCacheInUse) {
		t.Fatalf("reset with sequences live: %v, want ErrCacheInUse", err)
	}
}

// Release drops the block pool with the memory: the KV methods then say
// there is no cache; a new build brings a fresh pool.
func TestKVReleaseDropsThePool(t *testing.T) {
	ctx := context.Background()
	m, _, _, _ := kvManager(t, 40, 4)
	if r, err := m.KVStep(ctx, kvcache.Step{Admit: []kvcache.Admit{{Seq: 1, Tokens: tokens(0, 50)}}}); err != nil || len(r.Errors) != 0 {
		t.Fatalf("admit: %v %v", err, r.Errors)
	}
	if _, err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.KVStep(ctx, kvcache.Step{}); !errors.Is(err, gpuarena.ErrNoKVCache) {
		t.Fatalf("KVStep after Release: %v, want ErrNoKVCache", err)
	}
	if _, err := m.KVStats(ctx); !errors.Is(err, gpuarena.ErrNoKVCache) {
		t.Fatalf("KVStats after Release: %v, want ErrNoKVCache", err)
	}
	if held := kvHeld(t, m); held != 0 {
		t.Fatalf("kv_cache holds %d B after Release", held)
	}
}

// Steps from many goroutines, and from inside a forward step, all go
// through the one mailbox: each client's sequences grow as it asked, and
// the pool's invariants hold at the end.
func TestKVStepConcurrent(t *testing.T) {
	ctx := context.Background()
	m, _, _, _ := kvManager(t, 400, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		wg.Go(func() {
			id := kvcache.SeqID(c + 1)
			if r, err := m.KVStep(ctx, kvcache.Step{Admit: []kvcache.Admit{{Seq: id, Tokens: tokens(c*10000, 33)}}}); err != nil || len(r.Errors) != 0 {
				errs <- fmt.Errorf("client %d admit: %v %v", c, err, r.Errors)
				return
			}
			for i := range 40 {
				if r, err := m.KVStep(ctx, kvcache.Step{Append: []kvcache.Append{{Seq: id, Tokens: tokens(c*10000+33+i, 1)}}}); err != nil || len(r.Errors) != 0 {
					errs <- fmt.Errorf("client %d append %d: %v %v", c, i, err, r.Errors)
					return
				}
			}
		})
	}
	var inStep error
	if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error {
		_, inStep = m.KVStats(ctx)
		return nil
	}); err != nil || inStep != nil {
		t.Fatalf("KVStats from inside a step: %v / %v", err, inStep)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for c := range 8 {
		tbl, err := m.KVBlockTable(ctx, kvcache.SeqID(c+1))
		if err != nil || len(tbl[0]) != 5 { // 73 tokens
			t.Fatalf("client %d's table %v (%v), want 5 blocks", c, tbl, err)
		}
	}
	if err := m.KVCheck(ctx); err != nil {
		t.Fatal(err)
	}
}
