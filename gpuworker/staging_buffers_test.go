package gpuworker

import (
	"errors"
	"os"
	"testing"
	"unsafe"
)

// A staging buffer's stride is its size rounded up to whole pages and no
// further.
func TestRoundUp(t *testing.T) {
	for _, tc := range []struct{ bytes, page, want int64 }{
		{1, 4096, 4096},
		{700, 4096, 4096},
		{4096, 4096, 4096},
		{4097, 4096, 8192},
		{4 << 20, 4096, 4 << 20},
		{4<<20 + 1, 65536, 4<<20 + 65536},
		{MaxLoadChunkBytes, 4096, MaxLoadChunkBytes},
	} {
		if got := roundUp(tc.bytes, tc.page); got != tc.want {
			t.Errorf("roundUp(%d, %d) = %d, want %d", tc.bytes, tc.page, got, tc.want)
		}
	}
}

// A staging set's buffers have the asked size and capacity, start on pages
// of their own, in order, inside the mapping, untouched and unlocked;
// sizes ≤ 0 are refused.
func TestNewStagingSet(t *testing.T) {
	page := uintptr(os.Getpagesize())
	for _, tc := range []struct {
		count int
		bytes int64
	}{{1, 1}, {3, 700}, {18, 4096}, {5, 3 << 20}} {
		s, err := newStagingSet(tc.count, tc.bytes)
		if err != nil {
			t.Fatal(err)
		}
		base, end := uintptr(unsafe.Pointer(&s.mem[0])), uintptr(unsafe.Pointer(&s.mem[0]))+uintptr(len(s.mem))
		if len(s.bufs) != tc.count {
			t.Fatalf("%d × %d B: %d buffers", tc.count, tc.bytes, len(s.bufs))
		}
		prevEnd := base
		for i, b := range s.bufs {
			at := uintptr(unsafe.Pointer(&b.mem[0]))
			switch {
			case int64(len(b.mem)) != tc.bytes || int64(cap(b.mem)) != tc.bytes:
				t.Fatalf("%d × %d B: buffer %d has len %d, cap %d", tc.count, tc.bytes, i+1, len(b.mem), cap(b.mem))
			case at%page != 0 || at < prevEnd || at+uintptr(tc.bytes) > end:
				t.Fatalf("%d × %d B: buffer %d at %#x, not on a page of its own after %#x inside [%#x, %#x)", tc.count, tc.bytes, i+1, at, prevEnd, base, end)
			case b.touched || b.asked || b.pinned:
				t.Fatalf("%d × %d B: buffer %d new, yet touched %v, asked %v, pinned %v", tc.count, tc.bytes, i+1, b.touched, b.asked, b.pinned)
			}
			prevEnd = roundUp(at+uintptr(tc.bytes), page)
		}
		if err := unmapStaging(s.mem); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		count int
		bytes int64
	}{{0, 4096}, {1, 0}, {-1, 4096}, {2, -5}} {
		if _, err := newStagingSet(tc.count, tc.bytes); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("newStagingSet(%d, %d): %v, want ErrInvalidValue", tc.count, tc.bytes, err)
		}
	}
}
