package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

const (
	// seedChunk is the host buffer hidden_states is seeded through.
	seedChunk = 1 << 20
	// checkWindow is how much of residual a step reads back and compares.
	checkWindow = 64 << 10
	// poison is what a step writes over its residual window before the copy,
	// so a copy that did nothing shows up.
	poison = 0xA5
)

// checkError is a readback that differs from what was written: a broken
// invariant, not a failure to run.
type checkError struct{ msg string }

// Error says what differed.
func (e *checkError) Error() string { return e.msg }

// checkFailed returns a *checkError with the formatted message.
func checkFailed(format string, args ...any) error {
	return &checkError{msg: fmt.Sprintf(format, args...)}
}

// seedByte is the known pattern hidden_states holds at byte offset off.
func seedByte(off int64) byte {
	return byte(off) ^ byte(off>>8)*3 ^ byte(off>>16)*7 ^ byte(off>>24)*13
}

// workload is the forward-step work of "arenactl run" on one arena. It
// tracks how many steps run at once: with one forward at a time, never more
// than one.
type workload struct {
	a                   *device.Arena
	tokens              int64 // token_ids elements (u32)
	hiddenBytes         int64 // hidden_states and residual bytes
	inFlight, maxAtOnce atomic.Int64
	// probe, when not nil, is the weights each step also checks (run --model).
	probe *weightProbe
}

// newWorkload checks that the arena has the buffers a step uses.
func newWorkload(a *device.Arena) (*workload, error) {
	for _, id := range []arena.BufferID{arena.TokenIDs, arena.HiddenStates, arena.Residual} {
		if a.Ptr(id) == 0 {
			return nil, fmt.Errorf("run: the plan has no %s buffer (%s)", id, a.Plan.Buffers[id].Absent)
		}
	}
	if hb, rb := a.Bytes(arena.HiddenStates), a.Bytes(arena.Residual); hb != rb {
		return nil, fmt.Errorf("run: hidden_states (%d B) and residual (%d B) differ in size", hb, rb)
	}
	return &workload{a: a, tokens: a.Bytes(arena.TokenIDs) / 4, hiddenBytes: a.Bytes(arena.HiddenStates)}, nil
}

// seed writes the known pattern into all of hidden_states, in one forward
// step that is not counted as one of the run's steps.
func (w *workload) seed(ctx context.Context, m *gpuarena.Manager) error {
	_, err := m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		buf := make([]byte, min(seedChunk, w.hiddenBytes))
		base := a.Ptr(arena.HiddenStates)
		for off := int64(0); off < w.hiddenBytes; off += int64(len(buf)) {
			chunk := buf[:min(int64(len(buf)), w.hiddenBytes-off)]
			for i := range chunk {
				chunk[i] = seedByte(off + int64(i))
			}
			if err := dev.CopyHtoD(base+device.DevicePtr(off), chunk); err != nil {
				return fmt.Errorf("seed hidden_states: %w", err)
			}
		}
		return nil
	})
	return err
}

// clientBufs are one client's host buffers; its steps run one after another,
// so they are never used by two steps at once.
type clientBufs struct {
	tokens, tokensBack, residualBack []byte
	weightBack, weightWant           []byte // weightWindow each with a probe
}

// step returns forward step number s: write token ids, copy hidden_states to
// residual, read both back and compare.
func (w *workload) step(s int64, b *clientBufs) func(*device.Arena, device.Device) error {
	return func(a *device.Arena, dev device.Device) error {
		n := w.inFlight.Add(1)
		defer w.inFlight.Add(-1)
		for m := w.maxAtOnce.Load(); n > m && !w.maxAtOnce.CompareAndSwap(m, n); m = w.maxAtOnce.Load() {
		}

		tok := a.Ptr(arena.TokenIDs)
		for i := range w.tokens {
			binary.LittleEndian.PutUint32(b.tokens[4*i:], uint32(s*w.tokens+i))
		}
		if err := dev.CopyHtoD(tok, b.tokens); err != nil {
			return fmt.Errorf("step %d: write token_ids: %w", s, err)
		}

		hs, res := a.Ptr(arena.HiddenStates), a.Ptr(arena.Residual)
		win := min(int64(checkWindow), w.hiddenBytes)
		off := (s * 65537) % (w.hiddenBytes - win + 1)
		if err := dev.Memset(res+device.DevicePtr(off), poison, win); err != nil {
			return fmt.Errorf("step %d: poison residual: %w", s, err)
		}
		if err := dev.CopyDtoD(res, hs, w.hiddenBytes); err != nil {
			return fmt.Errorf("step %d: copy hidden_states → residual: %w", s, err)
		}

		if err := dev.CopyDtoH(b.tokensBack, tok); err != nil {
			return fmt.Errorf("step %d: read token_ids: %w", s, err)
		}
		if i := firstDiff(b.tokens, b.tokensBack); i >= 0 {
			return checkFailed("step %d: token_ids readback differs at token %d: wrote %d, read %d", s, i/4,
				binary.LittleEndian.Uint32(b.tokens[i/4*4:]), binary.LittleEndian.Uint32(b.tokensBack[i/4*4:]))
		}
		back := b.residualBack[:win]
		if err := dev.CopyDtoH(back, res+device.DevicePtr(off)); err != nil {
			return fmt.Errorf("step %d: read residual: %w", s, err)
		}
		for i, got := range back {
			if want := seedByte(off + int64(i)); got != want {
				return checkFailed("step %d: residual readback differs at byte %d: want %#02x, read %#02x", s, off+int64(i), want, got)
			}
		}
		if w.probe != nil {
			return w.probe.check(s, dev, b.weightBack, b.weightWant)
		}
		return nil
	}
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// run submits steps forward steps from clients goroutines (client g submits
// steps g, g+clients, …), stops submitting at the first failure, and records
// the results in rep. A failed readback is recorded as a broken invariant;
// any other step error is returned.
func (w *workload) run(ctx context.Context, m *gpuarena.Manager, steps, clients int, rep *runReport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu        sync.Mutex
		firstErr  error
		durations = make([]time.Duration, 0, steps)
		done      atomic.Int64
		wg        sync.WaitGroup
	)
	start := time.Now()
	for g := range clients {
		wg.Go(func() {
			b := &clientBufs{
				tokens:       make([]byte, 4*w.tokens),
				tokensBack:   make([]byte, 4*w.tokens),
				residualBack: make([]byte, min(int64(checkWindow), w.hiddenBytes)),
			}
			if w.probe != nil {
				b.weightBack, b.weightWant = make([]byte, weightWindow), make([]byte, weightWindow)
			}
			var mine []time.Duration
			for s := g; s < steps; s += clients {
				d, err := m.Forward(ctx, w.step(int64(s), b))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
				mine = append(mine, d)
				done.Add(1)
			}
			mu.Lock()
			durations = append(durations, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	rep.StepsWallMS = ms(time.Since(start))
	rep.Steps = int(done.Load())
	rep.MaxConcurrentForwards = int(w.maxAtOnce.Load())
	rep.setLatencies(durations)

	var ce *checkError
	switch {
	case firstErr == nil:
		return nil
	case errors.As(firstErr, &ce):
		rep.failed("step check failed: " + ce.Error())
		return nil
	default:
		return fmt.Errorf("run: after %d of %d steps: %w", rep.Steps, steps, firstErr)
	}
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 1) of sorted ds.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// sortedDurations returns ds sorted ascending.
func sortedDurations(ds []time.Duration) []time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s
}
