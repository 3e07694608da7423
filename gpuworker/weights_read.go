package gpuworker

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gpuarena/gpuarena/checkpoint"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/internal/messages"
)

// gatherGap is the largest gap between two pieces of one tensor in a chunk
// that a reader reads through rather than around: a rank's slice of a
// row-parallel weight (vLLM's RowParallelLinear: each row's 1/t of the
// columns) is one piece per row, so DeepSeek-V3's down_proj at t = 8 is
// 7,168 pieces of 256 B with 1,792 B between them, and one pread per piece
// — a system call for 256 B — ran the rank's load at 0.27 GB/s on the H200
// host. Reading the span whole and copying the pieces out reads t times
// the bytes at memory speed instead.
const gatherGap = 64 << 10

// gatherSpan is the most bytes one gathered read covers: the size of a
// reader's scratch buffer, allocated by the first gathered read.
const gatherSpan = 8 << 20

// chunkReader is one reader of upload: it preads chunks of the checkpoint
// into staging buffers.
type chunkReader struct {
	ck      *checkpoint.Checkpoint
	weights *device.Weights
	scratch []byte // the gathered reads' span, nil until one is needed
}

// run takes chunk numbers from jobs and a free buffer from free, reads the
// chunk into it and hands it on through full, until jobs is empty, a read
// fails, or stop is closed. The first time it takes a buffer no reader has
// used, it writes every page of it first (touchPages), so the GPU thread
// finds the pages there when it locks it.
func (r *chunkReader) run(plan [][]piece, jobs <-chan int, free <-chan *stagingBuffer, full chan<- filled, stop <-chan struct{}) {
	page := os.Getpagesize()
	for k := range jobs {
		var b *stagingBuffer
		select {
		case b = <-free:
		case <-stop:
			return
		}
		if !b.touched {
			touchPages(b.mem, page)
			b.touched = true
		}
		err := r.read(plan[k], b.mem)
		select {
		case full <- filled{k: k, buf: b, err: err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// read fills buf with the chunk's pieces: one pread per piece, or, for a
// run of pieces of one tensor in file order no more than gatherGap apart
// and gatherSpan across (a slice's rows), one pread of the run's span into
// the scratch buffer and a copy of each piece out of it.
func (r *chunkReader) read(c []piece, buf []byte) error {
	for i := 0; i < len(c); {
		j := gatherEnd(c, i)
		if j == i+1 {
			p := c[i]
			if err := r.readAt(p.t, buf[p.at:p.at+p.n], p.src); err != nil {
				return err
			}
			i = j
			continue
		}
		from := c[i].src
		span := c[j-1].src + c[j-1].n - from
		if r.scratch == nil {
			r.scratch = make([]byte, gatherSpan)
		}
		if err := r.readAt(c[i].t, r.scratch[:span], from); err != nil {
			return err
		}
		for _, p := range c[i:j] {
			copy(buf[p.at:p.at+p.n], r.scratch[p.src-from:])
		}
		i = j
	}
	return nil
}

// gatherEnd is the end of the run of pieces that starts at c[i]: the
// first k > i that is of another tensor, before or overlapping the piece
// before it, more than gatherGap after it, or past gatherSpan from c[i].
func gatherEnd(c []piece, i int) int {
	j := i + 1
	for ; j < len(c); j++ {
		prevEnd := c[j-1].src + c[j-1].n
		if c[j].t != c[i].t || c[j].src < prevEnd || c[j].src-prevEnd > gatherGap || c[j].src+c[j].n-c[i].src > gatherSpan {
			break
		}
	}
	return j
}

// readAt preads len(dst) bytes of tensor t from offset src of its bytes.
// A file that ends early is checkpoint.ErrTruncated: it shrank after Open
// checked it; another failure is checkpoint.ErrRead.
func (r *chunkReader) readAt(t int, dst []byte, src int64) error {
	name := r.weights.Tensors[t].Name
	s, err := r.ck.Section(name)
	if err != nil {
		return err
	}
	n, err := s.ReadAt(dst, src)
	if n == len(dst) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("read %s: %w: the file ended %d B into the tensor; it changed after Open checked it", name, checkpoint.ErrTruncated, src+int64(n))
	}
	return fmt.Errorf("read %s at %d: %w: %w", name, src, checkpoint.ErrRead, err)
}

// segments are the copies of chunk c, staged in buf, to the device: one per
// run of pieces of one tensor that are contiguous both in buf and on the
// device (a slice's rows land back to back), so a chunk of a row-parallel
// slice is one copy per tensor, not one per row. Pieces of two tensors are
// never merged, even where a pool puts them back to back: the GPU actor
// checks each copy against one tensor's allocation. It returns the chunk's
// bytes too.
func segments(c []piece, weights *device.Weights, buf []byte) ([]messages.HostSegment, int64) {
	var segs []messages.HostSegment
	var n int64
	var end device.DevicePtr // where the last segment ends on the device
	var start, at int64      // where it starts and ends in buf
	for i, p := range c {
		dst := weights.Tensors[p.t].Ptr + device.DevicePtr(p.off)
		if i > 0 && p.t == c[i-1].t && dst == end && p.at == at {
			segs[len(segs)-1].Src = buf[start : p.at+p.n]
		} else {
			start = p.at
			segs = append(segs, messages.HostSegment{Dst: dst, Src: buf[p.at : p.at+p.n]})
		}
		end, at = dst+device.DevicePtr(p.n), p.at+p.n
		n += p.n
	}
	return segs, n
}
