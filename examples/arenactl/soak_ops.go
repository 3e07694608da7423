package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// soakOp is one kind of request a soak client makes.
type soakOp string

// The soak's operations and their weights (out of soakWeightTotal).
const (
	opForward      soakOp = "forward"
	opOutOfRange   soakOp = "forward out of range"
	opCarve        soakOp = "carve"
	opLedger       soakOp = "ledger"
	opMemInfo      soakOp = "meminfo"
	opStats        soakOp = "stats"
	opCancelled    soakOp = "forward cancelled"
	opTimedOut     soakOp = "forward timed out"
	opBuildAgain   soakOp = "build again"
	soakWindow            = 64 << 10 // bytes a forward step writes and reads back
	soakCarveShare        = 200      // a carve asks up to 1/soakCarveShare of the slab
)

var soakWeights = []struct {
	op     soakOp
	weight int
}{
	{opForward, 30}, {opOutOfRange, 5}, {opCarve, 10}, {opLedger, 15}, {opMemInfo, 5},
	{opStats, 5}, {opCancelled, 5}, {opTimedOut, 5}, {opBuildAgain, 2},
}

// soakExpected are the errors each operation may give besides ErrClosed
// (every one may, once Close has begun); any other breaks an invariant.
var soakExpected = map[soakOp][]error{
	opForward:    {gpuarena.ErrReleased},
	opOutOfRange: {gpuworker.ErrOutOfRange, gpuarena.ErrReleased},
	opCarve:      {gpuarena.ErrSlabExhausted, gpuarena.ErrSlabAbsent, gpuarena.ErrReleased},
	opCancelled:  {context.Canceled},
	opTimedOut:   {context.DeadlineExceeded, gpuarena.ErrReleased},
	opBuildAgain: {gpuarena.ErrArenaBuilt, gpuarena.ErrReleased},
}

// soakClient is one goroutine of a soak cycle.
type soakClient struct {
	m      *gpuarena.Manager
	a      *device.Arena
	rep    *soakReport
	rng    *rand.Rand
	id     int
	cycle  int
	window []byte
	back   []byte
}

func newSoakClient(m *gpuarena.Manager, a *device.Arena, rep *soakReport, cycle, id int) *soakClient {
	return &soakClient{m: m, a: a, rep: rep, rng: newRand(cycle, id), id: id, cycle: cycle,
		window: make([]byte, soakWindow), back: make([]byte, soakWindow)}
}

// run makes requests until the manager answers ErrClosed.
func (c *soakClient) run() {
	for {
		op := c.pick()
		err := c.do(op)
		c.rep.count(op, err)
		if err != nil && !errors.Is(err, gpuarena.ErrClosed) && !expected(op, err) {
			c.rep.broke(fmt.Sprintf("cycle %d, client %d: %s: unexpected error: %v", c.cycle, c.id, op, err))
		}
		if errors.Is(err, gpuarena.ErrClosed) {
			return
		}
	}
}

// expected reports whether err is one op may give.
func expected(op soakOp, err error) bool {
	for _, e := range soakExpected[op] {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (c *soakClient) pick() soakOp {
	total := 0
	for _, w := range soakWeights {
		total += w.weight
	}
	n := c.rng.IntN(total)
	for _, w := range soakWeights {
		if n -= w.weight; n < 0 {
			return w.op
		}
	}
	return opLedger
}

// do makes one request; a broken invariant is recorded in the report.
func (c *soakClient) do(op soakOp) error {
	ctx := context.Background()
	switch op {
	case opForward:
		return c.forward(ctx)
	case opOutOfRange:
		_, err := c.m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
			return dev.Memset(a.Ptr(arena.HiddenStates)+1, 0, a.Bytes(arena.HiddenStates))
		})
		return err
	case opCarve:
		slabs := c.a.Plan.Slabs
		if len(slabs) == 0 { // the plan has none: the carve must say so
			_, _, err := c.m.CarveSlab(ctx, arena.SlabSSMRowwiseW, 256)
			return err
		}
		sl := slabs[c.rng.IntN(len(slabs))]
		_, _, err := c.m.CarveSlab(ctx, sl.Name, 1+c.rng.Int64N(max(sl.Bytes/soakCarveShare, 1)))
		return err
	case opLedger:
		l, err := c.m.Ledger(ctx)
		if err == nil {
			c.rep.ledger(l.Counters.CurrentBytes, l.BackendBytesInUse)
			if l.BackendBytesInUse >= 0 && l.BackendBytesInUse != l.Counters.CurrentBytes {
				c.rep.broke(fmt.Sprintf("cycle %d: the ledger holds %d B, the backend %d B", c.cycle, l.Counters.CurrentBytes, l.BackendBytesInUse))
			}
		}
		return err
	case opMemInfo:
		_, _, err := c.m.MemInfo(ctx)
		return err
	case opStats:
		st, err := c.m.Stats(ctx)
		if err == nil && len(st.ThreadIDs) > 1 {
			c.rep.broke(fmt.Sprintf("cycle %d: the GPU actor ran on %d OS threads %v", c.cycle, len(st.ThreadIDs), st.ThreadIDs))
		}
		return err
	case opCancelled:
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := c.m.Forward(cctx, func(*device.Arena, device.Device) error {
			c.rep.broke(fmt.Sprintf("cycle %d: %v", c.cycle, errStepRan))
			return nil
		})
		return err
	case opTimedOut:
		tctx, cancel := context.WithTimeout(ctx, time.Duration(c.rng.IntN(200))*time.Microsecond)
		defer cancel()
		_, err := c.m.Forward(tctx, func(*device.Arena, device.Device) error { return nil })
		return err
	default:
		_, err := c.m.BuildArena(ctx, c.a.Plan)
		return err
	}
}

// forward writes a window of hidden_states and reads it back in one step.
func (c *soakClient) forward(ctx context.Context) error {
	hb := c.a.Bytes(arena.HiddenStates)
	n := min(int64(soakWindow), hb)
	off := c.rng.Int64N(hb - n + 1)
	seed := byte(c.rng.IntN(256))
	for i := range c.window[:n] {
		c.window[i] = seed + byte(i)
	}
	_, err := c.m.Forward(ctx, func(a *device.Arena, dev device.Device) error {
		p := a.Ptr(arena.HiddenStates) + device.DevicePtr(off)
		if err := dev.CopyHtoD(p, c.window[:n]); err != nil {
			return err
		}
		if err := dev.CopyDtoH(c.back[:n], p); err != nil {
			return err
		}
		if !bytes.Equal(c.back[:n], c.window[:n]) {
			c.rep.broke(fmt.Sprintf("cycle %d, client %d: hidden_states[%d:%d] read back differs from what the step wrote", c.cycle, c.id, off, off+n))
		}
		return nil
	})
	return err
}
