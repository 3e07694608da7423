package gpuworker

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The staging mapping starts on a huge page, has the asked length, and no
// page of it is backed until touchPages writes one into every page, after
// which all are (mincore).
func TestStagingMapping(t *testing.T) {
	page := unix.Getpagesize()
	for _, bytes := range []int64{int64(page), 5 * int64(page), 4 << 20, 3<<20 + 700} {
		mem, err := mapStaging(bytes)
		if err != nil {
			t.Fatal(err)
		}
		if at := uintptr(unsafe.Pointer(&mem[0])); at%hugePageBytes != 0 || int64(len(mem)) != bytes {
			t.Fatalf("mapStaging(%d): %d B at %#x; want %d B at a multiple of %d", bytes, len(mem), at, bytes, hugePageBytes)
		}
		if n := resident(t, mem, page); n != 0 {
			t.Fatalf("mapStaging(%d): %d pages backed before any write; want 0", bytes, n)
		}
		touchPages(mem, page)
		if n, want := resident(t, mem, page), (len(mem)+page-1)/page; n != want {
			t.Fatalf("mapStaging(%d) then touchPages: %d of %d pages backed", bytes, n, want)
		}
		if err := unmapStaging(mem); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mapStaging(0); !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("mapStaging(0): %v, want ErrInvalidValue", err)
	}
}

// resident counts mem's pages backed by memory (mincore).
func resident(t *testing.T, mem []byte, page int) int {
	t.Helper()
	vec := make([]byte, (len(mem)+page-1)/page)
	// x/sys/unix has no mincore wrapper on Linux.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
