package gpuworker

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapStaging returns bytes of private anonymous memory outside the Go heap
// (mmap), for a weights load's staging buffers: starting at a multiple of
// hugePageBytes, with transparent huge pages asked for (madvise
// MADV_HUGEPAGE: advice; the memory works with 4 KiB pages too), so that a
// 4 MiB buffer is two huge pages to fault in and to lock instead of 1,024
// pages. It maps hugePageBytes more than asked and unmaps the unaligned
// head and tail: anonymous mappings start at page boundaries only, unless
// the kernel aligns large ones itself. No page is backed until written.
// Errors: mmap's (ENOMEM), wrapped with the size.
func mapStaging(bytes int64) ([]byte, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("map staging (%d B): %w: size must be > 0", bytes, ErrInvalidValue)
	}
	span := uintptr(bytes) + hugePageBytes
	p, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("map %d B of host staging memory: %w; lower LoadOptions.Readers or ChunkBytes", span, err)
	}
	head := (hugePageBytes - uintptr(p)%hugePageBytes) % hugePageBytes
	tail := span - head - roundUp(uintptr(bytes), uintptr(unix.Getpagesize()))
	if head > 0 {
		_ = unix.MunmapPtr(p, head) // a page-aligned part of the mapping: cannot fail
	}
	if tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, span-tail), tail)
	}
	mem := unsafe.Slice((*byte)(unsafe.Add(p, head)), bytes)
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // advice: the memory works without it
	return mem, nil
}

// unmapStaging unmaps memory from mapStaging. Errors: munmap's.
func unmapStaging(mem []byte) error {
	if err := unix.MunmapPtr(unsafe.Pointer(&mem[0]), uintptr(len(mem))); err != nil {
		return fmt.Errorf("unmap %d B of host staging memory: %w", len(mem), err)
	}
	return nil
}
