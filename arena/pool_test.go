package arena

import (
	"errors"
	"math"
	"path/filepath"
	"testing"
)

// Every config's pool is aligned, non-overlapping, and wastes at most 0.01%
// of the arena on padding, at the M the benchmarks use and at the default.
func TestPoolLayoutIsAlignedAndTight(t *testing.T) {
	for _, path := range exampleConfigs(t) {
		for _, m := range []int64{512, 8192} {
			_, plan := planExample(t, filepath.Base(path), Options{MaxBatchTokens: m})
			l, err := NewPoolLayout(plan)
			if err != nil {
				t.Fatal(err)
			}
			var end int64
			for _, id := range BufferIDs() {
				b := plan.Buffers[id]
				off := l.Offsets[id]
				if !b.Present() {
					if off != -1 {
						t.Fatalf("%s: absent %s at offset %d", path, id, off)
					}
					continue
				}
				if off%PoolAlign != 0 || off < end {
					t.Fatalf("%s M=%d: %s at %d (previous end %d): misaligned or overlapping", path, m, id, off, end)
				}
				end = off + b.Bytes
			}
			if l.Bytes < end || l.Bytes%PoolAlign != 0 || l.WasteBytes != l.Bytes-plan.BufferBytes {
				t.Fatalf("%s M=%d: pool %d B, end %d, waste %d", path, m, l.Bytes, end, l.WasteBytes)
			}
			if l.WasteBytes*10000 > plan.BufferBytes {
				t.Fatalf("%s M=%d: %d B of padding is more than 0.01%% of %d B", path, m, l.WasteBytes, plan.BufferBytes)
			}
		}
	}
}

func TestPoolLayoutByHand(t *testing.T) {
	p := &Plan{}
	p.Buffers[HiddenStates] = Buffer{ID: HiddenStates, Bytes: 100}
	p.Buffers[Logits] = Buffer{ID: Logits, Bytes: 300}
	p.Buffers[TokenIDs] = Buffer{ID: TokenIDs, Bytes: 256}
	p.BufferBytes = 656
	l, err := NewPoolLayout(p)
	if err != nil {
		t.Fatal(err)
	}
	// hidden_states [0,100) → logits at 256 [256,556) → token_ids at 768 [768,1024).
	if l.Offsets[HiddenStates] != 0 || l.Offsets[Logits] != 256 || l.Offsets[TokenIDs] != 768 || l.Bytes != 1024 || l.WasteBytes != 368 {
		t.Fatalf("layout %+v", l)
	}
}

// A pool that would pass int64 gets an *OverflowError naming the buffer
// whose end overflowed, not a wrapped-around layout.
func TestPoolLayoutOverflowNamesTheBuffer(t *testing.T) {
	p := &Plan{}
	p.Buffers[HiddenStates] = Buffer{ID: HiddenStates, Bytes: math.MaxInt64 - 100}
	p.Buffers[Logits] = Buffer{ID: Logits, Bytes: 300}
	_, err := NewPoolLayout(p)
	var o *OverflowError
	if !errors.As(err, &o) || o.What != "pool offset of logits" {
		t.Fatalf("NewPoolLayout: %v, want an *OverflowError for %q", err, "pool offset of logits")
	}
}
