package gpuworker

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hostMemory returns n bytes of private anonymous memory that the kernel
// backs only where it is touched (mmap, MAP_NORESERVE): a 100 GiB arena
// costs no RAM until it is written. Errors: mmap's.
func hostMemory(n int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return mem, nil
}

// releaseHostMemory unmaps memory from hostMemory. Errors: munmap's.
func releaseHostMemory(mem []byte) error {
	if err := unix.Munmap(mem); err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}

// zeroHostMemory zeroes dst. When dst is page-aligned and a whole number of
// pages it gives them back to the kernel (madvise MADV_DONTNEED), which
// reads them back as zeros, instead of writing them.
func zeroHostMemory(dst []byte) {
	page := unix.Getpagesize()
	if len(dst) > 0 && len(dst)%page == 0 && uintptr(unsafe.Pointer(&dst[0]))%uintptr(page) == 0 &&
		unix.Madvise(dst, unix.MADV_DONTNEED) == nil {
		return
	}
	clear(dst)
}
