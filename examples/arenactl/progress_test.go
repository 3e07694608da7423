package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/device"
)

// Not a terminal, loadProgress writes one line per tenth passed (chunks
// within a tenth add none), the last at 100%, each with the total bytes.
func TestLoadProgressPlain(t *testing.T) {
	var buf bytes.Buffer
	p := newLoadProgress(&buf)
	if p.tty {
		t.Fatal("a bytes.Buffer taken for a terminal")
	}
	const total = 1000
	for _, done := range []int64{50, 99, 100, 150, 420, 421, 999, 1000} {
		p.report(device.LoadProgress{BytesDone: done, BytesTotal: total, Tensor: "t", Elapsed: time.Second, BytesPerSecond: float64(done)})
	}
	want := "" +
		"weights:  10%  100 of 1000 B  0.00 GB/s  t\n" +
		"weights:  42%  420 of 1000 B  0.00 GB/s  t\n" +
		"weights:  99%  999 of 1000 B  0.00 GB/s  t\n" +
		"weights: 100%  1000 of 1000 B  0.00 GB/s  t\n"
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
