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

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
)

var benchModel = flag.String("gpuarena.model", "", "a model folder (config.json and safetensors) for BenchmarkCUDAWeightsUpload")

// BenchmarkCUDAWeightsUpload puts the weights loader beside its two limits,
// in bytes/s (MB/s as go test prints it), on the checkpoint in the folder
// -gpuarena.model (scripts/load-bench.sh makes a Llama-3.1-8B-shaped one
// with arenactl gen-model and reads it into the page cache first):
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
//   - load/readers-N/chunk-C: Worker.LoadWeights of the folder, pooled (the
//     weights freed after each, untimed), with its setup-ms and
//     steady-GB/s (see below).
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
					buf, err := cb.AllocStaging(bufBytes)
					if err != nil {
						b.Fatal(err)
					}
					defer cb.FreeStaging(buf)
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
			// staging and weights allocations before the first chunk
			// (setup-ms: Weights.Load less the progress's last
			// Elapsed, which starts after them), and the rate from the
			// first chunk's copy to the last (steady-GB/s).
			var setup, steady float64
			for b.Loop() {
				var first, last device.LoadProgress
				progress := func(p device.LoadProgress) {
					if first.BytesDone == 0 {
						first = p
					}
					last = p
				}
				wt, err := w.LoadWeights(context.Background(), ck, LoadOptions{Readers: n, ChunkBytes: c, Progress: progress})
				if err != nil {
					b.Fatal(err)
				}
				setup += float64((wt.Load - last.Elapsed).Microseconds()) / 1e3
				steady += float64(last.BytesDone-first.BytesDone) / (last.Elapsed - first.Elapsed).Seconds() / 1e9
				b.StopTimer()
				if _, _, err := w.FreeOwner(context.Background(), device.WeightsOwner); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(setup/float64(b.N), "setup-ms")
			b.ReportMetric(steady/float64(b.N), "steady-GB/s")
		})
	}
}

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

// withCUDA runs fn with a cuda backend made on the benchmark's goroutine,
// locked to its thread (which ends with it), and a device allocation of
// bytes.
func withCUDA(b *testing.B, bytes int64, fn func(cb *cudaBackend, dst device.DevicePtr)) {
	runtime.LockOSThread()
	be, err := newCUDABackend(0)
	if err != nil {
		b.Fatal(err)
	}
	cb := be.(*cudaBackend)
	defer cb.Close()
	dst, err := cb.Alloc(bytes)
	if err != nil {
		b.Fatal(err)
	}
	defer cb.Free(dst)
	fn(cb, dst)
}
