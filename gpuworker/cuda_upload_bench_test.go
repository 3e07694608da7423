//go:build cuda

package gpuworker

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
)

var benchModel = flag.String("gpuarena.model", "", "a model folder (config.json and safetensors) for BenchmarkCUDAWeightsUpload")

// BenchmarkCUDAWeightsUpload puts the weights loader beside its two limits,
// in bytes/s (MB/s as go test prints it), on the checkpoint in the folder
// -gpuarena.model (scripts/load-bench.sh makes a Llama-3.1-8B-shaped one
// with arenactl gen-model and reads it into the page cache first), and
// times the parts of its setup:
//
//   - link/pinned-B/copy-C: cuMemcpyHtoDAsync of the checkpoint's size,
//     C (16 MiB, or the loader's default chunk) at a time, from one
//     page-locked buffer of B = 16 MiB (which the host's caches may hold)
//     or 1 GiB (which they cannot: memory, as a load's copies read), then
//     one synchronise: the host-to-device link's limit. link/pageable: cuMemcpyHtoD from Go
//     memory, the path LoadWeights takes without page-locked buffers.
//
//   - input/pread-N, input/mmap-N: reading every tensor from the page
//     cache and nothing else, in chunks of DefaultLoadChunkBytes (the
//     loader's) by N goroutines, with pread
//     (checkpoint.Section) and through a read-only mmap of each shard
//     (copied into a buffer, as a loader would): the input's limit.
//
//   - setup/pool: the weights pool's cuMemAlloc and cuMemFree alone, of
//     the size a pooled load of the checkpoint allocates (alloc-ms,
//     free-ms).
//
//   - setup/staging-cold and setup/staging-prefault-N-…-huge|4KiB: a
//     default load's staging, DefaultLoadReaders + 2 buffers of
//     DefaultLoadChunkBytes, page-locked on one thread (RegisterStaging:
//     register-ms) and released (UnregisterStaging: unregister-ms; munmap:
//     unmap-ms). Cold: each buffer its own mmap (huge pages asked for),
//     registered untouched, so the driver faults its pages in on the
//     registering thread. Prefault,
//     as the loader makes it: one mapping (mapStaging) whose buffers N
//     goroutines touch in parallel (touchPages: prefault-ms) before they
//     are registered; with huge pages asked for (the loader's) or refused.
//     setup-ms is prefault and register, release-ms unregister and unmap.
//     The loader does not pay setup-ms before its first copy: it locks
//     each buffer with its first copy, and unlocks each after its last.
//
//   - load/readers-N/chunk-C: Worker.LoadWeights of the folder, pooled (the
//     weights freed after each and loadSettle waited for, untimed), with
//     first-ms (the call to the first chunk's progress), tail-ms (the last
//     chunk's progress to the return), setup-ms (their sum), steady-GB/s
//     (the rate between the first progress and the last) and mid-GB/s
//     (between 10% and 90% of the bytes).
//
//     ./gpuworker.test -test.run '^$' -test.bench CUDAWeightsUpload -test.benchtime 3x -gpuarena.model DIR
func BenchmarkCUDAWeightsUpload(b *testing.B) {
	if *benchModel == "" {
		b.Skip("no -gpuarena.model folder")
	}
	ck, err := checkpoint.Open(*benchModel)
	if err != nil {
		b.Fatal(err)
	}
	defer ck.Close()
	total := ck.TotalBytes()
	const chunk = 16 << 20
	// The link from one page-locked buffer of 16 MiB, which the host's
	// caches may hold, and of 1 GiB, which they cannot: copies from memory,
	// as a load's are; in copies of 16 MiB, and of the loader's default
	// chunk.
	for _, bufBytes := range []int64{chunk, 1 << 30} {
		for _, piece := range []int64{chunk, DefaultLoadChunkBytes} {
			b.Run(fmt.Sprintf("link/pinned-%dMiB/copy-%dMiB", bufBytes>>20, piece>>20), func(b *testing.B) {
				withCUDA(b, total, func(cb *cudaBackend, dst device.DevicePtr) {
					buf, release := registeredBuffer(b, cb, bufBytes)
					defer release()
					for i := range buf {
						buf[i] = byte(i)
					}
					b.SetBytes(total)
					for b.Loop() {
						for off := int64(0); off < total; off += piece {
							at := off % bufBytes
							if err := cb.CopyHtoDAsync(dst+device.DevicePtr(off), buf[at:at+min(piece, total-off)]); err != nil {
								b.Fatal(err)
							}
						}
						if err := cb.MarkStaging(buf); err != nil {
							b.Fatal(err)
						}
						if err := cb.WaitStaging(buf); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
	b.Run("link/pageable", func(b *testing.B) {
		withCUDA(b, total, func(cb *cudaBackend, dst device.DevicePtr) {
			buf := make([]byte, chunk)
			b.SetBytes(total)
			for b.Loop() {
				for off := int64(0); off < total; off += chunk {
					if err := cb.CopyHtoD(dst+device.DevicePtr(off), buf[:min(chunk, total-off)]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	})
	for _, n := range []int{1, 8, DefaultLoadReaders} {
		b.Run(fmt.Sprintf("input/pread-%d", n), func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				parallelChunks(b, ck, n, DefaultLoadChunkBytes, func(buf []byte, t checkpoint.Tensor, off int64) error {
					r, err := ck.Section(t.Name)
					if err != nil {
						return err
					}
					_, err = r.ReadAt(buf, off)
					return err
				})
			}
		})
		b.Run(fmt.Sprintf("input/mmap-%d", n), func(b *testing.B) {
			maps := map[string][]byte{}
			for _, t := range ck.Tensors() {
				if maps[t.File] != nil {
					continue
				}
				m, err := mmapFile(t.File)
				if err != nil {
					b.Fatal(err)
				}
				defer unix.Munmap(m)
				maps[t.File] = m
			}
			b.SetBytes(total)
			for b.Loop() {
				parallelChunks(b, ck, n, DefaultLoadChunkBytes, func(buf []byte, t checkpoint.Tensor, off int64) error {
					start := t.Offset + off
					copy(buf, maps[t.File][start:start+int64(len(buf))])
					return nil
				})
			}
		})
	}
	b.Run("setup/pool", func(b *testing.B) {
		pool, err := WeightsAllocatedBytes(ck, device.LayoutPooled)
		if err != nil {
			b.Fatal(err)
		}
		onCUDA(b, func(cb *cudaBackend) {
			var alloc, free time.Duration
			for b.Loop() {
				t0 := time.Now()
				p, err := cb.Alloc(pool)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := cb.Free(p); err != nil {
					b.Fatal(err)
				}
				alloc, free = alloc+t1.Sub(t0), free+time.Since(t1)
			}
			b.ReportMetric(ms(alloc)/float64(b.N), "alloc-ms")
			b.ReportMetric(ms(free)/float64(b.N), "free-ms")
		})
	})
	const count, chunkBytes = DefaultLoadReaders + 2, DefaultLoadChunkBytes
	b.Run(fmt.Sprintf("setup/staging-cold-%dx%dMiB", count, chunkBytes>>20), func(b *testing.B) {
		onCUDA(b, func(cb *cudaBackend) {
			var st stagingTimes
			for b.Loop() {
				t0 := time.Now()
				bufs := make([][]byte, count)
				for i := range bufs {
					bufs[i] = coldStagingBuffer(b, cb, chunkBytes)
				}
				st.register += time.Since(t0)
				st.release(b, cb, bufs, func() error {
					for _, buf := range bufs {
						if err := unix.Munmap(buf); err != nil {
							return err
						}
					}
					return nil
				})
			}
			st.report(b)
		})
	})
	// The loader's way, one mapping with huge pages asked for (mapStaging),
	// and the same with 4 KiB pages.
	for _, huge := range []bool{true, false} {
		pages := "huge"
		if !huge {
			pages = "4KiB"
		}
		b.Run(fmt.Sprintf("setup/staging-prefault-%d-%dx%dMiB-%s", DefaultLoadReaders, count, chunkBytes>>20, pages), func(b *testing.B) {
			onCUDA(b, func(cb *cudaBackend) {
				var st stagingTimes
				for b.Loop() {
					t0 := time.Now()
					set := prefaultedStaging(b, count, chunkBytes, huge)
					t1 := time.Now()
					bufs := make([][]byte, count)
					for i, sb := range set.bufs {
						if err := cb.RegisterStaging(sb.mem); err != nil {
							b.Fatal(err)
						}
						bufs[i] = sb.mem
					}
					st.prefault, st.register = st.prefault+t1.Sub(t0), st.register+time.Since(t1)
					st.release(b, cb, bufs, func() error { return unmapStaging(set.mem) })
				}
				st.report(b)
			})
		})
	}
	type loadCase struct{ readers, chunk int }
	var cases []loadCase
	for _, n := range []int{8, 12, DefaultLoadReaders, 24} {
		cases = append(cases, loadCase{n, DefaultLoadChunkBytes})
	}
	cases = append(cases, loadCase{DefaultLoadReaders, 2 << 20}, loadCase{DefaultLoadReaders, 8 << 20})
	for _, lc := range cases {
		n, c := lc.readers, int64(lc.chunk)
		b.Run(fmt.Sprintf("load/readers-%d/chunk-%dMiB", n, c>>20), func(b *testing.B) {
			system := actor.NewActorSystem()
			defer system.Shutdown()
			w, err := Start(system, BackendConfig{Kind: KindCUDA}.Factory(), WithoutBudget())
			if err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			b.SetBytes(total)
			// Besides the load's rate (ns/op, MB/s), its parts: the
			// time from the call to the first chunk's progress
			// (first-ms: the pool's allocation, the first chunks'
			// reads, locks and copies), from the last chunk's progress
			// to the return (tail-ms: the staging's release), their sum
			// (setup-ms), the rate between the first progress and the
			// last (steady-GB/s) and between 10% and 90% of the bytes
			// (mid-GB/s).
			var first, tail, steady, mid float64
			for b.Loop() {
				var p0, p1, q1, q9 device.LoadProgress
				var t0, t1 time.Time
				progress := func(p device.LoadProgress) {
					if p0.BytesDone == 0 {
						p0, t0 = p, time.Now()
					}
					if q1.BytesDone == 0 && p.BytesDone*10 >= p.BytesTotal {
						q1 = p
					}
					if q9.BytesDone == 0 && p.BytesDone*10 >= 9*p.BytesTotal {
						q9 = p
					}
					p1, t1 = p, time.Now()
				}
				start := time.Now()
				if _, err := w.LoadWeights(context.Background(), ck, LoadOptions{Readers: n, ChunkBytes: c, Progress: progress}); err != nil {
					b.Fatal(err)
				}
				first, tail = first+ms(t0.Sub(start)), tail+ms(time.Since(t1))
				steady += float64(p1.BytesDone-p0.BytesDone) / (p1.Elapsed - p0.Elapsed).Seconds() / 1e9
				mid += float64(q9.BytesDone-q1.BytesDone) / (q9.Elapsed - q1.Elapsed).Seconds() / 1e9
				b.StopTimer()
				if _, _, err := w.FreeOwner(context.Background(), device.WeightsOwner); err != nil {
					b.Fatal(err)
				}
				time.Sleep(loadSettle)
				b.StartTimer()
			}
			b.ReportMetric(first/float64(b.N), "first-ms")
			b.ReportMetric(tail/float64(b.N), "tail-ms")
			b.ReportMetric((first+tail)/float64(b.N), "setup-ms")
			b.ReportMetric(steady/float64(b.N), "steady-GB/s")
			b.ReportMetric(mid/float64(b.N), "mid-GB/s")
		})
	}
}

// loadSettle is the untimed pause between two loads of
// BenchmarkCUDAWeightsUpload, after the first load's weights are freed: a
// load that starts right after cuMemFree of the previous 16 GB pool copied
// its first 10% at about half the link's rate on the H200 host (57.5 ms
// against 30.5 ms for each later 10%; 47.2 GB/s for the whole load), and
// one that starts 500 ms later at the link's (32.5 ms; 50.3 GB/s). A
// server loads its weights once, on a settled device.
const loadSettle = 500 * time.Millisecond

// parallelChunks cuts every tensor into chunks of size bytes and has n
// goroutines call read on them, each with a buffer of its own.
func parallelChunks(b *testing.B, ck *checkpoint.Checkpoint, n int, size int64, read func(buf []byte, t checkpoint.Tensor, off int64) error) {
	type job struct {
		t   checkpoint.Tensor
		off int64
	}
	jobs := make(chan job, 64)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			buf := make([]byte, size)
			for j := range jobs {
				if err := read(buf[:min(size, j.t.Bytes-j.off)], j.t, j.off); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, t := range ck.Tensors() {
		for off := int64(0); off < t.Bytes; off += size {
			jobs <- job{t, off}
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// mmapFile maps path read-only.
func mmapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
}

// onCUDA runs fn with a cuda backend made on the benchmark's goroutine,
// locked to its thread (which ends with it).
func onCUDA(b *testing.B, fn func(cb *cudaBackend)) {
	runtime.LockOSThread()
	be, err := newCUDABackend(0)
	if err != nil {
		b.Fatal(err)
	}
	cb := be.(*cudaBackend)
	defer cb.Close()
	fn(cb)
}

// withCUDA is onCUDA with a device allocation of bytes.
func withCUDA(b *testing.B, bytes int64, fn func(cb *cudaBackend, dst device.DevicePtr)) {
	onCUDA(b, func(cb *cudaBackend) {
		dst, err := cb.Alloc(bytes)
		if err != nil {
			b.Fatal(err)
		}
		defer cb.Free(dst)
		fn(cb, dst)
	})
}

// registeredBuffer is bytes of staging memory as a load makes it (one
// mapping, its pages touched, registered), and the function that
// unregisters and unmaps it, to call on the backend's thread before it
// closes.
func registeredBuffer(b *testing.B, cb *cudaBackend, bytes int64) ([]byte, func()) {
	set, err := newStagingSet(1, bytes)
	if err != nil {
		b.Fatal(err)
	}
	buf := set.bufs[0].mem
	touchPages(buf, os.Getpagesize())
	if err := cb.RegisterStaging(buf); err != nil {
		b.Fatal(err)
	}
	return buf, func() {
		if err := cb.UnregisterStaging(buf); err != nil {
			b.Error(err)
		}
		if err := unmapStaging(set.mem); err != nil {
			b.Error(err)
		}
	}
}

// coldStagingBuffer is one staging buffer made as a load made them before
// its readers touched their pages: an anonymous mapping of its own, huge
// pages asked for, registered untouched, so that cuMemHostRegister faults
// every page in on the calling thread. The caller unregisters and unmaps it.
func coldStagingBuffer(b *testing.B, cb *cudaBackend, bytes int64) []byte {
	mem, err := unix.Mmap(-1, 0, int(bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	if err := cb.RegisterStaging(mem); err != nil {
		b.Fatal(err)
	}
	return mem
}

// prefaultedStaging is a load's staging set (newStagingSet) whose buffers
// DefaultLoadReaders goroutines touch in parallel, each its share, as the
// loader's readers do; without huge, huge pages are refused
// (MADV_NOHUGEPAGE) before any page is touched.
func prefaultedStaging(b *testing.B, count int, bytes int64, huge bool) *stagingSet {
	set, err := newStagingSet(count, bytes)
	if err != nil {
		b.Fatal(err)
	}
	if !huge {
		if err := unix.Madvise(set.mem, unix.MADV_NOHUGEPAGE); err != nil {
			b.Fatal(err)
		}
	}
	var touched sync.WaitGroup
	for g := range DefaultLoadReaders {
		touched.Go(func() {
			for i := g; i < len(set.bufs); i += DefaultLoadReaders {
				touchPages(set.bufs[i].mem, os.Getpagesize())
			}
		})
	}
	touched.Wait()
	return set
}

// stagingTimes adds up the parts of a staging benchmark's iterations.
type stagingTimes struct{ prefault, register, unregister, unmap time.Duration }

// release unregisters bufs and unmaps them (unmap), timing both.
func (st *stagingTimes) release(b *testing.B, cb *cudaBackend, bufs [][]byte, unmap func() error) {
	t0 := time.Now()
	for _, buf := range bufs {
		if err := cb.UnregisterStaging(buf); err != nil {
			b.Fatal(err)
		}
	}
	t1 := time.Now()
	if err := unmap(); err != nil {
		b.Fatal(err)
	}
	st.unregister, st.unmap = st.unregister+t1.Sub(t0), st.unmap+time.Since(t1)
}

// report reports each part in ms per iteration, and setup-ms (prefault and
// register) and release-ms (unregister and unmap).
func (st *stagingTimes) report(b *testing.B) {
	per := func(d time.Duration) float64 { return ms(d) / float64(b.N) }
	b.ReportMetric(per(st.prefault), "prefault-ms")
	b.ReportMetric(per(st.register), "register-ms")
	b.ReportMetric(per(st.prefault+st.register), "setup-ms")
	b.ReportMetric(per(st.unregister), "unregister-ms")
	b.ReportMetric(per(st.unmap), "unmap-ms")
	b.ReportMetric(per(st.unregister+st.unmap), "release-ms")
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
