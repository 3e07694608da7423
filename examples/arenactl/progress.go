package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gpuarena/gpuarena/device"
)

// loadProgress shows a weights load's progress (gpuarena.WithLoadProgress)
// on w, the command's stderr: a progress bar (bytes done and total, rate,
// the current tensor) when w is a terminal, else plain lines, one each time
// the load passes another tenth of its bytes, the last at 100%. It never
// writes to stdout, so --json output stays clean. Use it from the load's
// goroutine only (the callback's).
type loadProgress struct {
	w      io.Writer
	tty    bool
	bar    *progressbar.ProgressBar // the terminal's bar, made at the first report
	tenths int64                    // plain lines: the tenths of the total reported so far
}

// newLoadProgress shows progress on w, as a bar when w is a terminal (an
// *os.File that golang.org/x/term says is one).
func newLoadProgress(w io.Writer) *loadProgress {
	f, ok := w.(*os.File)
	return &loadProgress{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

// report takes one progress report of the load: bytes done of total after a
// chunk reached the device, the tensor the chunk ended in, the rate.
// Write errors to w are ignored: progress is for the user, not the result.
func (p *loadProgress) report(lp device.LoadProgress) {
	if lp.BytesTotal <= 0 {
		return
	}
	if p.tty {
		if p.bar == nil {
			p.bar = progressbar.NewOptions64(lp.BytesTotal,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionShowBytes(true),
				progressbar.OptionShowTotalBytes(true),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionShowDescriptionAtLineEnd(),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
				progressbar.OptionSetDescription("weights"))
		}
		p.bar.Describe("weights: " + lp.Tensor)
		_ = p.bar.Set64(lp.BytesDone)
		return
	}
	tenths := lp.BytesDone * 10 / lp.BytesTotal
	if lp.BytesDone >= lp.BytesTotal {
		tenths = 10
	}
	if tenths <= p.tenths {
		return
	}
	p.tenths = tenths
	fmt.Fprintf(p.w, "weights: %3d%%  %d of %d B  %.2f GB/s  %s\n",
		lp.BytesDone*100/lp.BytesTotal, lp.BytesDone, lp.BytesTotal, lp.BytesPerSecond/1e9, lp.Tensor)
}
