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

// PoolOffsets places each non-empty item at the next 256-byte-aligned
// offset and rounds the end up; PooledBytes is that total; a negative size
// is an *OptionError and an aligned total past 2^63−1 an *OverflowError.
func TestPoolOffsets(t *testing.T) {
	offs, total, err := PoolOffsets([]int64{1000, 0, 512, 1, 257})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, -1, 1024, 1536, 1792}
	for i := range want {
		if offs[i] != want[i] {
			t.Errorf("offsets %v, want %v", offs, want)
			break
		}
	}
	if total != 2304 {
		t.Errorf("total %d B, want 2304", total)
	}
	for _, c := range []struct {
		sizes []int64
		want  int64
	}{{nil, 0}, {[]int64{0, 0}, 0}, {[]int64{256}, 256}, {[]int64{1}, 256}, {[]int64{255, 257}, 768}} {
		if got, err := PooledBytes(c.sizes); err != nil || got != c.want {
			t.Errorf("PooledBytes(%v) = %d, %v; want %d", c.sizes, got, err, c.want)
		}
	}
	var oe *OptionError
	if _, err := PooledBytes([]int64{1, -2}); !errors.As(err, &oe) {
		t.Errorf("negative size: err = %v, want an *OptionError", err)
	}
	var ov *OverflowError
	if _, err := PooledBytes([]int64{math.MaxInt64 - 100}); !errors.As(err, &ov) {
		t.Errorf("past 2^63−1: err = %v, want an *OverflowError", err)
	}
	if _, err := PooledBytes([]int64{math.MaxInt64 / 2, math.MaxInt64 / 2, 300}); !errors.As(err, &ov) {
		t.Errorf("sum past 2^63−1: err = %v, want an *OverflowError", err)
	}
}
