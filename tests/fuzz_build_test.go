package tests

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// FuzzBuildAndTouch builds hand-made plans and touches the arenas they make.
//
// The input is a base plan (base: testkit.SmallPlan, or arena.PlanFor of an
// example config with tiny serving options), a list of plan edits (edits:
// buffer bytes, shapes, dtypes, ids and absent reasons; buffer_bytes,
// slab_bytes, total_bytes; slabs added, renamed, resized, duplicated,
// dropped; values from 0, ±1 and MaxInt64/MinInt64 to raw int64s) and a list
// of forward steps (touches: Memset, CopyHtoD, CopyDtoH and CopyDtoD at
// pointers anchored at a buffer, a slab, the pool, NULL or the top of the
// address space, at its start, inside, at or past its end, before it or a
// raw int64 away, with lengths 0, small, to the end, one past it, negative,
// raw, MaxInt64).
//
// For each layout (pooled and discrete), on a fresh manager over a fresh
// 256 MiB simulated device, it checks that:
//
//   - a plan that Plan.Validate refuses is refused by BuildArena with the same
//     *arena.PlanError (errors.Is arena.ErrInvalidPlan), the same message for
//     both layouts, and no allocation: the backend was never asked, the
//     ledger's counters and the device are at 0;
//
//   - a plan Validate accepts builds exactly when what its layout allocates
//     (the 256-byte-aligned pool, or every buffer, plus the slabs) fits the
//     manager's budget, and otherwise fails with ErrOutOfMemory leaving the
//     ledger and the device at 0;
//
//   - a built arena has a pointer for every present buffer and slab, NULL for
//     an absent buffer, each pooled buffer at the first 256-byte boundary
//     after the one before, norm_unit_w zero-filled, and the ledger holds
//     exactly its bytes;
//
//   - every Device call succeeds exactly when its whole range lies inside one
//     buffer (a pool view), or else inside one allocation (the pool's
//     padding, a slab), as computed here from the plan and the arena's
//     pointers; it then reaches the backend once and the bytes read back are
//     the bytes written; otherwise it fails with the sentinel the range calls
//     for (ErrInvalidValue for a negative length or a device→device copy
//     whose ranges overlap, ErrNotAllocated for a pointer in no allocation,
//     ErrOutOfRange for a range past its end) and never reaches the
//     backend; never a panic;
//
//   - after every case the ledger agrees with the device (agrees), and after
//     Close the device holds 0 bytes.
//
//     go test ./tests -run '^$' -fuzz '^FuzzBuildAndTouch$' -fuzztime 60s -parallel 1
func FuzzBuildAndTouch(f *testing.F) {
	for _, s := range buildSeeds() {
		f.Add(s.base, s.edits, s.touches)
	}
	f.Fuzz(func(t *testing.T, base uint8, edits, touches []byte) {
		runBuildAndTouch(t, base, edits, touches)
	})
}

// TestBuildAndTouchSeeds runs FuzzBuildAndTouch's seeds by name, so that a
// failing one says which it is, after checking that each seed is still the
// case its name says: the field Validate refuses, or the build's outcome.
func TestBuildAndTouchSeeds(t *testing.T) {
	utilization := arena.DefaultGPUMemoryUtilization
	budget := int64(utilization * float64(fuzzCapacity))
	for _, s := range buildSeeds() {
		t.Run(s.name, func(t *testing.T) {
			plan := fuzzPlan(t, s.base, s.edits)
			got := "builds"
			var pe *arena.PlanError
			if err := plan.Validate(); errors.As(err, &pe) {
				got = pe.Field
			} else if err != nil {
				t.Fatalf("Validate: %v, want nil or an *arena.PlanError", err)
			} else {
				_, pooledFits := arenaNeed(plan, device.LayoutPooled, budget)
				_, discreteFits := arenaNeed(plan, device.LayoutDiscrete, budget)
				switch {
				case !pooledFits && !discreteFits:
					got = "out of memory"
				case !pooledFits:
					got = "pooled out of memory"
				case !discreteFits:
					got = "discrete out of memory"
				}
			}
			if got != s.want {
				t.Fatalf("the seed's plan %s, want %s", got, s.want)
			}
			runBuildAndTouch(t, s.base, s.edits, s.touches)
		})
	}
}

const (
	// fuzzCapacity is the simulated device: small, so that a plan of a few
	// hundred MiB runs out of memory (the budget is 90 % of it).
	fuzzCapacity = 256 * mib
	// maxTouch is the most bytes a Device call whose range is valid moves:
	// a longer valid range is cut to it, to keep an execution cheap (an
	// invalid range keeps its length, which costs nothing).
	maxTouch = 1 << 20
	// maxEdits, maxSteps and maxCalls bound one execution.
	maxEdits = 24
	maxSteps = 3
	maxCalls = 6
)

// The bases a fuzz input starts from (base % numBases).
const (
	baseSmall        = iota // testkit.SmallPlan: 3 buffers, slab "w"
	baseSmallNoSlab         // the same without its slab
	baseQwen3Next           // qwen3-next-80b-a3b, 4 tokens: 23 buffers, 11 MiB
	baseQwen3NextFP8        // and the FP8 row-wise slab: 2.4 GiB, past the device
	baseLlama               // llama-3.1-8b, 4 tokens: 16 buffers, 10 MiB
	numBases
)

// planEdit is a plan edit's opcode (its first byte, % numEdits); the bytes
// after it are its operands.
const (
	editBytes       = iota // buffer, size: set the buffer's bytes
	editShape              // buffer, rank (0: nil), dims: set its shape
	editPresent            // buffer, dtype, rank, dims: make it present, bytes = shape product (wrapping), totals fixed
	editAbsent             // buffer: make it absent (0 B, no shape, a reason), totals fixed
	editReason             // buffer, reason: set its absent reason ("" or "fuzz")
	editDType              // buffer, raw byte: set its dtype
	editID                 // buffer, raw byte: set its ID field
	editTotal              // size: set total_bytes
	editBufferBytes        // size: set buffer_bytes
	editSlabBytes          // size: set slab_bytes
	editAddSlab            // name, size: append a slab
	editSlabSize           // slab, size: set a slab's bytes
	editSlabName           // slab, name: rename a slab
	editDupSlab            // slab: append a copy of a slab
	editDropSlab           // slab: remove a slab
	editFixTotals          // recompute the three totals (wrapping sums)
	numEdits
)

// fuzzSizes are the sizes a size operand below len(fuzzSizes) picks; any
// other operand byte is followed by a raw little-endian int64.
var fuzzSizes = [...]int64{0, 1, -1, 2, 255, 256, 4096, mib, 3 * mib, 64 * mib, 200 * mib, fuzzCapacity,
	1 << 40, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64}

// fuzzDims are the dimensions a dim operand below len(fuzzDims) picks;
// any other is followed by a raw int64.
var fuzzDims = [...]int64{1, 2, 3, 4, 512, 1024, 3072, 0, -1, 1 << 31, 1 << 62, math.MaxInt64}

// fuzzSlabNames are the names a name operand picks.
var fuzzSlabNames = [...]string{"w", "v", "", "ssm_rowwise_w_bf16"}

// rawOperand is an operand byte that is followed by a raw int64 (for a size
// or a dim).
const rawOperand = 31

// fuzzBytes reads a fuzz input; past its end every byte reads 0.
type fuzzBytes []byte

func (r *fuzzBytes) empty() bool { return len(*r) == 0 }

func (r *fuzzBytes) u8() byte {
	if len(*r) == 0 {
		return 0
	}
	c := (*r)[0]
	*r = (*r)[1:]
	return c
}

func (r *fuzzBytes) u64() uint64 {
	var b [8]byte
	n := copy(b[:], *r)
	*r = (*r)[n:]
	return binary.LittleEndian.Uint64(b[:])
}

// size is a size operand: one of fuzzSizes or a raw int64.
func (r *fuzzBytes) size() int64 {
	if c := r.u8() % 32; int(c) < len(fuzzSizes) {
		return fuzzSizes[c]
	}
	return int64(r.u64())
}

// dim is a dimension operand: one of fuzzDims or a raw int64.
func (r *fuzzBytes) dim() int64 {
	if c := r.u8() % 32; int(c) < len(fuzzDims) {
		return fuzzDims[c]
	}
	return int64(r.u64())
}

func (r *fuzzBytes) buffer() arena.BufferID { return arena.BufferID(r.u8() % byte(arena.NumBuffers)) }

// basePlans are the PlanFor bases, made once per process.
var basePlans = sync.OnceValues(func() (map[int]*arena.Plan, error) {
	plans := map[int]*arena.Plan{}
	for base, c := range map[int]struct {
		config string
		fp8    bool
	}{
		baseQwen3Next:    {"qwen3-next-80b-a3b-thinking.json", false},
		baseQwen3NextFP8: {"qwen3-next-80b-a3b-thinking.json", true},
		baseLlama:        {"llama-3.1-8b.json", false},
	} {
		cfg, err := arena.LoadConfig("../examples/configs/" + c.config)
		if err != nil {
			return nil, err
		}
		p, err := arena.PlanFor(cfg, arena.Options{MaxBatchTokens: 4, MaxSeqLen: 256, FP8Rowwise: c.fp8})
		if err != nil {
			return nil, err
		}
		plans[base] = p
	}
	return plans, nil
})

// clonePlan is a deep copy of p: edits and builds never share a shape or
// the slab list.
func clonePlan(p *arena.Plan) *arena.Plan {
	c := *p
	for i := range c.Buffers {
		c.Buffers[i].Shape = slices.Clone(c.Buffers[i].Shape)
	}
	c.Slabs = slices.Clone(c.Slabs)
	return &c
}

// fuzzPlan is the base plan with the edits applied.
func fuzzPlan(t *testing.T, base uint8, edits []byte) *arena.Plan {
	t.Helper()
	var p *arena.Plan
	switch b := int(base) % numBases; b {
	case baseSmall:
		p = testkit.SmallPlan("w")
	case baseSmallNoSlab:
		p = testkit.SmallPlan("w")
		p.Slabs, p.SlabBytes, p.TotalBytes = nil, 0, p.BufferBytes
	default:
		plans, err := basePlans()
		if err != nil {
			t.Fatalf("base plans: %v", err)
		}
		p = clonePlan(plans[b])
	}
	r := fuzzBytes(edits)
	for n := 0; n < maxEdits && !r.empty(); n++ {
		applyEdit(p, &r)
	}
	return p
}

// applyEdit applies the next edit of r to p.
func applyEdit(p *arena.Plan, r *fuzzBytes) {
	slab := func() int { // the index of an existing slab, or -1
		c := r.u8()
		if len(p.Slabs) == 0 {
			return -1
		}
		return int(c) % len(p.Slabs)
	}
	name := func() string { return fuzzSlabNames[int(r.u8())%len(fuzzSlabNames)] }
	shape := func(minRank int) []int64 {
		rank := minRank + int(r.u8()%4)
		if rank == 0 {
			return nil
		}
		s := make([]int64, rank)
		for i := range s {
			s[i] = r.dim()
		}
		return s
	}
	switch r.u8() % numEdits {
	case editBytes:
		id := r.buffer()
		p.Buffers[id].Bytes = r.size()
	case editShape:
		id := r.buffer()
		p.Buffers[id].Shape = shape(0)
	case editPresent:
		id := r.buffer()
		b := &p.Buffers[id]
		b.DType = arena.DType(1 + r.u8()%7) // a known dtype
		b.Shape = shape(1)
		b.Bytes = b.DType.Size()
		for _, d := range b.Shape {
			b.Bytes *= d // wrapping: an overflowed shape is Validate's to refuse
		}
		b.Absent = ""
		fixTotals(p)
	case editAbsent:
		id := r.buffer()
		p.Buffers[id] = arena.Buffer{ID: id, Absent: "fuzz"}
		fixTotals(p)
	case editReason:
		id := r.buffer()
		p.Buffers[id].Absent = [...]string{"", "fuzz"}[r.u8()%2]
	case editDType:
		id := r.buffer()
		p.Buffers[id].DType = arena.DType(r.u8())
	case editID:
		id := r.buffer()
		p.Buffers[id].ID = arena.BufferID(r.u8())
	case editTotal:
		p.TotalBytes = r.size()
	case editBufferBytes:
		p.BufferBytes = r.size()
	case editSlabBytes:
		p.SlabBytes = r.size()
	case editAddSlab:
		p.Slabs = append(p.Slabs, arena.SlabSpec{Name: name(), Bytes: r.size()})
	case editSlabSize:
		if i := slab(); i >= 0 {
			p.Slabs[i].Bytes = r.size()
		}
	case editSlabName:
		if i := slab(); i >= 0 {
			p.Slabs[i].Name = name()
		}
	case editDupSlab:
		if i := slab(); i >= 0 {
			p.Slabs = append(p.Slabs, p.Slabs[i])
		}
	case editDropSlab:
		if i := slab(); i >= 0 {
			p.Slabs = slices.Delete(p.Slabs, i, i+1)
		}
	case editFixTotals:
		fixTotals(p)
	}
}

// fixTotals sets buffer_bytes, slab_bytes and total_bytes to the sums, in
// wrapping arithmetic: a sum that overflows is Validate's to refuse.
func fixTotals(p *arena.Plan) {
	p.BufferBytes, p.SlabBytes = 0, 0
	for _, b := range p.Buffers {
		p.BufferBytes += b.Bytes
	}
	for _, s := range p.Slabs {
		p.SlabBytes += s.Bytes
	}
	p.TotalBytes = p.BufferBytes + p.SlabBytes
}

// gateBackend is the simulated device behind a gpuworker.WithFaults that
// arms no fault and counts, in its OnCall, the allocations and the memsets
// and copies that reach it: a Device call the ledger refuses must not reach
// the backend. The manager runs on dev.
type gateBackend struct {
	*gpuworker.HostSim
	dev             gpuworker.Backend
	allocs, touches atomic.Int64
}

func newGateBackend(sim *gpuworker.HostSim) *gateBackend {
	g := &gateBackend{HostSim: sim}
	g.dev = gpuworker.WithFaults(sim, gpuworker.Faults{OnCall: func(op string, _ int) {
		switch op {
		case "alloc":
			g.allocs.Add(1)
		case "memset", "copy":
			g.touches.Add(1)
		}
	}})
	return g
}

// runBuildAndTouch is one fuzz case: the plan of base and edits, built and
// touched under both layouts.
func runBuildAndTouch(t *testing.T, base uint8, edits, touches []byte) {
	plan := fuzzPlan(t, base, edits)
	verr := plan.Validate()
	refusals := map[device.Layout]string{}
	for _, layout := range []device.Layout{device.LayoutPooled, device.LayoutDiscrete} {
		refusals[layout] = buildAndTouch(t, clonePlan(plan), layout, verr, touches)
	}
	if verr != nil && refusals[device.LayoutPooled] != refusals[device.LayoutDiscrete] {
		t.Fatalf("the layouts refuse the plan differently:\npooled:   %s\ndiscrete: %s",
			refusals[device.LayoutPooled], refusals[device.LayoutDiscrete])
	}
}

// buildAndTouch builds plan with layout on a fresh manager and device,
// checks the outcome against verr (Validate's verdict) and the budget, runs
// the forward steps of touches on a built arena, and closes. It returns the
// refusal's message when verr is not nil.
func buildAndTouch(t *testing.T, plan *arena.Plan, layout device.Layout, verr error, touches []byte) string {
	t.Helper()
	ctx := context.Background()
	gate := newGateBackend(newSim(t, gpuworker.HostSimConfig{TotalBytes: fuzzCapacity}))
	m, err := gpuarena.New(quiet, gpuarena.WithArenaLayout(layout),
		gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return gate.dev, nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	need, fits := arenaNeed(plan, layout, m.Budget())

	a, err := m.BuildArena(ctx, plan)
	var refusal string
	switch {
	case verr != nil:
		var pe *arena.PlanError
		if a != nil || !errors.Is(err, arena.ErrInvalidPlan) || !errors.As(err, &pe) {
			t.Fatalf("%s: BuildArena of a plan Validate refuses (%v) = %v, want an *arena.PlanError", layout, verr, err)
		}
		if pe.Error() != verr.Error() {
			t.Fatalf("%s: BuildArena refuses with %q, Validate with %q", layout, pe.Error(), verr.Error())
		}
		if n := gate.allocs.Load(); n != 0 {
			t.Fatalf("%s: the refused plan made %d allocations", layout, n)
		}
		l := agrees(t, m, gate.HostSim)
		if c := l.Counters; c.CurrentBytes != 0 || c.PeakBytes != 0 || c.Allocations != 0 || c.Failures != 0 || len(l.Entries) != 0 {
			t.Fatalf("%s: the refused plan reached the ledger: %+v, %d entries", layout, c, len(l.Entries))
		}
		refusal = err.Error()
	case !fits:
		if a != nil || !errors.Is(err, gpuarena.ErrOutOfMemory) {
			t.Fatalf("%s: BuildArena of a valid plan needing %s of a %d B budget = %v, want ErrOutOfMemory", layout, needText(need), m.Budget(), err)
		}
		if l := agrees(t, m, gate.HostSim); l.Counters.CurrentBytes != 0 || len(l.Entries) != 0 {
			t.Fatalf("%s: after the failed build the ledger holds %d B in %d entries", layout, l.Counters.CurrentBytes, len(l.Entries))
		}
	default:
		if err != nil {
			t.Fatalf("%s: BuildArena of a valid plan needing %s of a %d B budget: %v", layout, needText(need), m.Budget(), err)
		}
		checkBuilt(t, m, gate, a, plan, layout, need)
		runTouches(t, m, gate, a, touches)
		agrees(t, m, gate.HostSim)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("%s: close: %v", layout, err)
	}
	if n := gate.BytesInUse(); n != 0 {
		t.Fatalf("%s: the device holds %d B after Close", layout, n)
	}
	return refusal
}

// arenaNeed is what building a valid plan allocates with layout, and whether
// that fits budget: every buffer at a 256-byte-aligned offset in one pool
// rounded up to 256 B (pooled), or every buffer on its own (discrete), and
// the slabs. A need that does not fit in int64 is -1, and does not fit.
func arenaNeed(plan *arena.Plan, layout device.Layout, budget int64) (int64, bool) {
	need := plan.BufferBytes
	if layout == device.LayoutPooled {
		var ok bool
		if need, ok = poolBytes(plan); !ok {
			return -1, false
		}
	}
	if need > math.MaxInt64-plan.SlabBytes {
		return -1, false
	}
	need += plan.SlabBytes
	return need, need <= budget
}

// needText says arenaNeed's need: "N B", or that it passes MaxInt64.
func needText(need int64) string {
	if need < 0 {
		return "more bytes than an int64 holds"
	}
	return fmt.Sprintf("%d B", need)
}

// poolOffsets are the offsets of plan's present buffers in a pool, each
// aligned up to arena.PoolAlign, -1 for an absent one; false when they pass
// MaxInt64.
func poolOffsets(plan *arena.Plan) (offs [arena.NumBuffers]int64, end int64, ok bool) {
	const align = arena.PoolAlign
	for id, b := range plan.Buffers {
		offs[id] = -1
		if !b.Present() {
			continue
		}
		if end > math.MaxInt64-(align-1) {
			return offs, 0, false
		}
		off := (end + align - 1) / align * align
		if off > math.MaxInt64-b.Bytes {
			return offs, 0, false
		}
		offs[id], end = off, off+b.Bytes
	}
	return offs, end, true
}

// poolBytes is the pooled allocation of plan: the end of its last buffer
// rounded up to arena.PoolAlign.
func poolBytes(plan *arena.Plan) (int64, bool) {
	const align = arena.PoolAlign
	_, end, ok := poolOffsets(plan)
	if !ok || end > math.MaxInt64-(align-1) {
		return 0, false
	}
	return (end + align - 1) / align * align, true
}

// checkBuilt checks a built arena: its pointers, pool, slabs, and that the
// ledger holds need bytes.
func checkBuilt(t *testing.T, m *gpuarena.Manager, gate *gateBackend, a *device.Arena, plan *arena.Plan, layout device.Layout, need int64) {
	t.Helper()
	if a == nil || a.Plan != plan || a.Layout != layout {
		t.Fatalf("%s: built arena %+v, want the plan's, layout %s", layout, a, layout)
	}
	offs, _, _ := poolOffsets(plan)
	for id, b := range plan.Buffers {
		p := a.Ptrs[id]
		switch {
		case !b.Present() && p != 0:
			t.Fatalf("%s: absent %s has pointer %#x, want NULL", layout, arena.BufferID(id), p)
		case b.Present() && p == 0:
			t.Fatalf("%s: present %s (%d B) has a NULL pointer", layout, arena.BufferID(id), b.Bytes)
		case b.Present() && layout == device.LayoutPooled && p != a.Pool+device.DevicePtr(offs[id]):
			t.Fatalf("%s: %s at %#x, want the pool %#x + offset %d", layout, arena.BufferID(id), p, a.Pool, offs[id])
		}
	}
	if pool, _ := poolBytes(plan); layout == device.LayoutPooled && (a.Pool == 0 || a.PoolBytes != pool) {
		t.Fatalf("%s: pool %#x of %d B, want %d B", layout, a.Pool, a.PoolBytes, pool)
	}
	if len(a.Slabs) != len(plan.Slabs) {
		t.Fatalf("%s: %d slabs, the plan has %d", layout, len(a.Slabs), len(plan.Slabs))
	}
	for i, s := range a.Slabs {
		if s.Name != plan.Slabs[i].Name || s.Bytes != plan.Slabs[i].Bytes || s.Ptr == 0 {
			t.Fatalf("%s: slab %d is %+v, the plan's %+v", layout, i, s, plan.Slabs[i])
		}
	}
	if l := agrees(t, m, gate.HostSim); l.Counters.CurrentBytes != need {
		t.Fatalf("%s: the ledger holds %d B after the build, want %d B", layout, l.Counters.CurrentBytes, need)
	}
}

// region is a range of device memory: a buffer, a pool, a slab.
type region struct {
	name  string
	start device.DevicePtr
	bytes int64
}

// holds reports whether ptr lies in r, and its offset there.
func (r region) holds(ptr device.DevicePtr) (int64, bool) {
	if ptr < r.start || uint64(ptr-r.start) >= uint64(r.bytes) {
		return 0, false
	}
	return int64(ptr - r.start), true
}

// arenaMap is the memory of a built arena as the Device sees it: the
// buffers of a pool (a range that starts in one must end in it), and the
// allocations (a pooled arena's pool, a discrete arena's buffers, the slabs).
type arenaMap struct {
	views, allocs []region
}

func newArenaMap(a *device.Arena) arenaMap {
	var m arenaMap
	for id, b := range a.Plan.Buffers {
		if !b.Present() {
			continue
		}
		r := region{arena.BufferID(id).String(), a.Ptrs[id], b.Bytes}
		if a.Layout == device.LayoutPooled {
			m.views = append(m.views, r)
		} else {
			m.allocs = append(m.allocs, r)
		}
	}
	if a.Layout == device.LayoutPooled {
		m.allocs = append(m.allocs, region{"pool", a.Pool, a.PoolBytes})
	}
	for _, s := range a.Slabs {
		m.allocs = append(m.allocs, region{"slab " + s.Name, s.Ptr, s.Bytes})
	}
	return m
}

// expect is where a Device call on [ptr, ptr+n) starts and the error it must
// return (nil: it must succeed).
func (m arenaMap) expect(ptr device.DevicePtr, n int64) (where string, want error) {
	if n < 0 {
		return "a negative length", gpuarena.ErrInvalidValue
	}
	for _, regions := range [][]region{m.views, m.allocs} {
		for _, r := range regions {
			if off, ok := r.holds(ptr); ok {
				where = fmt.Sprintf("offset %d of %s (%d B)", off, r.name, r.bytes)
				if n > r.bytes-off {
					return where, gpuarena.ErrOutOfRange
				}
				return where, nil
			}
		}
	}
	return "no allocation", gpuarena.ErrNotAllocated
}

// The Device calls of a touch (its first byte % numTouchOps).
const (
	touchMemset = iota
	touchHtoD
	touchDtoH
	touchDtoD
	numTouchOps
)

// anchor is where a touch's pointer is taken from: a region (its start and
// bytes), which may be empty (NULL, the top of the address space, an absent
// buffer).
type anchor struct {
	name  string
	start device.DevicePtr
	bytes int64
}

// nextAnchor reads an anchor: a byte below 128 is a buffer (present or not),
// otherwise by its value % 8 NULL, a slab, the pool, the top of the address
// space, a raw address, or a present buffer.
func nextAnchor(r *fuzzBytes, a *device.Arena) anchor {
	buffer := func(id arena.BufferID) anchor { return anchor{id.String(), a.Ptrs[id], a.Plan.Buffers[id].Bytes} }
	c := r.u8()
	if c < 128 {
		return buffer(arena.BufferID(c % byte(arena.NumBuffers)))
	}
	switch c % 8 {
	case 0:
		return anchor{name: "NULL"}
	case 1:
		i := int(r.u8())
		if len(a.Slabs) == 0 {
			return anchor{name: "NULL (no slab)"}
		}
		s := a.Slabs[i%len(a.Slabs)]
		return anchor{"slab " + s.Name, s.Ptr, s.Bytes}
	case 2:
		return anchor{"pool", a.Pool, a.PoolBytes}
	case 3:
		return anchor{name: "the top of the address space", start: ^device.DevicePtr(0)}
	case 4:
		return anchor{name: "a raw address", start: device.DevicePtr(r.u64())}
	default:
		var present []arena.BufferID
		for id, b := range a.Plan.Buffers {
			if b.Present() {
				present = append(present, arena.BufferID(id))
			}
		}
		return buffer(present[int(r.u8())%len(present)])
	}
}

// nextPtr reads a position relative to an anchor: its start, a little past
// it, a little before its end, its end, a little past its end, a little
// before its start, a raw int64 away (wrapping), its middle.
func nextPtr(r *fuzzBytes, an anchor) (device.DevicePtr, string) {
	end := an.start + device.DevicePtr(an.bytes)
	switch r.u8() % 8 {
	case 0:
		return an.start, "start of " + an.name
	case 1:
		k := device.DevicePtr(r.u8())
		return an.start + k, fmt.Sprintf("start of %s + %d", an.name, k)
	case 2:
		k := device.DevicePtr(r.u8())
		return end - 1 - k, fmt.Sprintf("end of %s - %d", an.name, k+1)
	case 3:
		return end, "end of " + an.name
	case 4:
		k := device.DevicePtr(r.u8())
		return end + k, fmt.Sprintf("end of %s + %d", an.name, k)
	case 5:
		k := device.DevicePtr(r.u8())
		return an.start - 1 - k, fmt.Sprintf("start of %s - %d", an.name, k+1)
	case 6:
		k := int64(r.u64())
		return an.start + device.DevicePtr(k), fmt.Sprintf("start of %s %+d", an.name, k)
	default:
		return an.start + device.DevicePtr(an.bytes/2), "middle of " + an.name
	}
}

// nextLen reads a length for a range at ptr in an: 0, small, to the
// anchor's end, one past it, negative, a raw int64, up to 64 KiB, MaxInt64.
func nextLen(r *fuzzBytes, an anchor, ptr device.DevicePtr) int64 {
	toEnd := int64(an.start + device.DevicePtr(an.bytes) - ptr)
	switch r.u8() % 8 {
	case 0:
		return 0
	case 1:
		return 1 + int64(r.u8())
	case 2:
		return toEnd
	case 3:
		return toEnd + 1
	case 4:
		return -1 - int64(r.u8())
	case 5:
		return int64(r.u64())
	case 6:
		return 1 + int64(r.u8()) | int64(r.u8())<<8
	default:
		return math.MaxInt64
	}
}

// runTouches runs the forward steps of touches on the built arena a.
func runTouches(t *testing.T, m *gpuarena.Manager, gate *gateBackend, a *device.Arena, touches []byte) {
	t.Helper()
	r := fuzzBytes(touches)
	am := newArenaMap(a)
	steps := 1 + int(r.u8())%maxSteps
	for step := range steps {
		calls := int(r.u8()) % (maxCalls + 1)
		_, err := m.Forward(context.Background(), func(a *device.Arena, dev device.Device) error {
			if step == 0 {
				if err := normUnitZero(a, dev); err != nil {
					return err
				}
			}
			for call := range calls {
				if err := touch(&r, a, am, dev, gate); err != nil {
					return fmt.Errorf("call %d: %w", call+1, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s, step %d of %d: %v", a.Layout, step+1, steps, err)
		}
		agrees(t, m, gate.HostSim)
	}
}

// normUnitZero checks that norm_unit_w reads as zeros (its first 4 KiB) in
// the first step: BuildArena zero-fills it.
func normUnitZero(a *device.Arena, dev device.Device) error {
	n := min(a.Bytes(arena.NormUnitW), 4096)
	if n == 0 {
		return nil
	}
	got := make([]byte, n)
	if err := dev.CopyDtoH(got, a.Ptr(arena.NormUnitW)); err != nil {
		return fmt.Errorf("read norm_unit_w: %w", err)
	}
	if i := slices.IndexFunc(got, func(b byte) bool { return b != 0 }); i >= 0 {
		return fmt.Errorf("norm_unit_w byte %d is %#x after the build, want 0", i, got[i])
	}
	return nil
}

// touch makes the next Device call of r and checks it against am: success
// or the sentinel the range calls for, whether it reached the backend, and
// the bytes read back after a write.
func touch(r *fuzzBytes, a *device.Arena, am arenaMap, dev device.Device, gate *gateBackend) error {
	op := r.u8() % numTouchOps
	dstAn := nextAnchor(r, a)
	dst, dstAt := nextPtr(r, dstAn)
	n := nextLen(r, dstAn, dst)
	var src device.DevicePtr
	var srcAt string
	if op == touchDtoD {
		srcAn := nextAnchor(r, a)
		src, srcAt = nextPtr(r, srcAn)
	}
	value := r.u8()
	if op == touchHtoD || op == touchDtoH {
		n = max(0, min(n, maxTouch+1)) // a host buffer's length
	}
	where, want := am.expect(dst, n)
	if op == touchDtoD {
		// The source is checked first, then the destination, then that the
		// two do not overlap (the driver's result would be undefined).
		if srcWhere, srcWant := am.expect(src, n); srcWant != nil {
			where, want = "source at "+srcWhere, srcWant
		} else if want == nil && src < dst+device.DevicePtr(n) && dst < src+device.DevicePtr(n) {
			where, want = where+"; the ranges overlap", gpuarena.ErrInvalidValue
		}
	}
	if want == nil && n > maxTouch {
		n = maxTouch // a valid range, cut short: still inside
	}
	what := fmt.Sprintf("%s of %d B at %#x (%s; %s)", [...]string{"memset", "copy host→device", "copy device→host", "copy device→device"}[op],
		n, uint64(dst), dstAt, where)
	if op == touchDtoD {
		what += fmt.Sprintf(" from %#x (%s)", uint64(src), srcAt)
	}

	var pre []byte // a device→device copy's source, read before the copy
	if want == nil && op == touchDtoD {
		pre = make([]byte, n)
		if err := dev.CopyDtoH(pre, src); err != nil {
			return fmt.Errorf("%s: reading the source first: %w", what, err)
		}
	}
	var data []byte
	before := gate.touches.Load()
	var err error
	switch op {
	case touchMemset:
		err = dev.Memset(dst, value, n)
	case touchHtoD:
		data = make([]byte, n)
		for i := range data {
			data[i] = byte(i*31) ^ value
		}
		err = dev.CopyHtoD(dst, data)
	case touchDtoH:
		err = dev.CopyDtoH(make([]byte, n), dst)
	case touchDtoD:
		err = dev.CopyDtoD(dst, src, n)
	}
	reached := gate.touches.Load() - before
	if want != nil {
		switch {
		case !errors.Is(err, want):
			return fmt.Errorf("%s = %v, want %v", what, err, want)
		case reached != 0:
			return fmt.Errorf("%s: the ledger let it reach the backend (%d calls; it returned %v), want it refused before: %v", what, reached, err, want)
		}
		return nil
	}
	if err != nil || reached != 1 {
		return fmt.Errorf("%s = %v after %d backend calls, want success after 1", what, err, reached)
	}
	// Read back what was written.
	switch op {
	case touchMemset:
		data = slices.Repeat([]byte{value}, int(n))
	case touchDtoD:
		data = pre
	case touchDtoH:
		return nil
	}
	got := make([]byte, n)
	if err := dev.CopyDtoH(got, dst); err != nil {
		return fmt.Errorf("%s: reading it back: %w", what, err)
	}
	if i := firstDiffAt(got, data); i >= 0 {
		return fmt.Errorf("%s: byte %d reads back %#x, want %#x", what, i, got[i], data[i])
	}
	return nil
}

// buildSeed is one named seed of FuzzBuildAndTouch and what its plan does:
// "builds", "out of memory" (both layouts), "pooled out of memory", or the
// field of the *arena.PlanError Validate refuses it with.
type buildSeed struct {
	name           string
	base           uint8
	edits, touches []byte
	want           string
}

// The encoding of a fuzz input, for the seeds.

// opSize is a size operand: the index of v in fuzzSizes, or v raw.
func opSize(v int64) []byte {
	if i := slices.Index(fuzzSizes[:], v); i >= 0 {
		return []byte{byte(i)}
	}
	return binary.LittleEndian.AppendUint64([]byte{rawOperand}, uint64(v))
}

// opDim is a dimension operand: the index of v in fuzzDims, or v raw.
func opDim(v int64) []byte {
	if i := slices.Index(fuzzDims[:], v); i >= 0 {
		return []byte{byte(i)}
	}
	return binary.LittleEndian.AppendUint64([]byte{rawOperand}, uint64(v))
}

// cat concatenates byte strings.
func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

// setBytes, setTotal, setBufferBytes, addSlab, present, absent and dupSlab
// encode one plan edit each.
func setBytes(id arena.BufferID, v int64) []byte { return cat([]byte{editBytes, byte(id)}, opSize(v)) }
func setTotal(v int64) []byte                    { return cat([]byte{editTotal}, opSize(v)) }
func setBufferBytes(v int64) []byte              { return cat([]byte{editBufferBytes}, opSize(v)) }
func addSlab(name byte, v int64) []byte          { return cat([]byte{editAddSlab, name}, opSize(v)) }
func absent(id arena.BufferID) []byte            { return []byte{editAbsent, byte(id)} }
func dupSlab(i byte) []byte                      { return []byte{editDupSlab, i} }
func present(id arena.BufferID, dt arena.DType, dims ...int64) []byte {
	e := []byte{editPresent, byte(id), byte(dt - 1), byte(len(dims) - 1)}
	for _, d := range dims {
		e = append(e, opDim(d)...)
	}
	return e
}

// Anchors of a touch.
var (
	anNULL = []byte{128}
	anPool = []byte{130}
)

func anBuffer(id arena.BufferID) []byte { return []byte{byte(id)} }
func anSlab(i byte) []byte              { return []byte{129, i} }

// Positions relative to an anchor.
var (
	posStart  = []byte{0}
	posEnd    = []byte{3}
	posMiddle = []byte{7}
)

func posAfterStart(k byte) []byte { return []byte{1, k} }
func posBeforeEnd(k byte) []byte  { return []byte{2, k} } // end - 1 - k
func posAfterEnd(k byte) []byte   { return []byte{4, k} }
func posBefore(k byte) []byte     { return []byte{5, k} } // start - 1 - k
func posRaw(v int64) []byte       { return binary.LittleEndian.AppendUint64([]byte{6}, uint64(v)) }

// Lengths.
var (
	lenZero    = []byte{0}
	lenToEnd   = []byte{2}
	lenPastEnd = []byte{3} // to the end, plus one
	lenMax     = []byte{7}
)

func lenSmall(k byte) []byte { return []byte{1, k} } // 1 + k
func lenNeg(k byte) []byte   { return []byte{4, k} } // -1 - k
func lenRaw(v int64) []byte  { return binary.LittleEndian.AppendUint64([]byte{5}, uint64(v)) }
func lenKiB(hi byte) []byte  { return []byte{6, 0, hi} } // 1 + hi·256
func memset(dst, pos, n []byte, v byte) []byte {
	return cat([]byte{touchMemset}, dst, pos, n, []byte{v})
}
func htod(dst, pos, n []byte, v byte) []byte { return cat([]byte{touchHtoD}, dst, pos, n, []byte{v}) }
func dtoh(src, pos, n []byte) []byte         { return cat([]byte{touchDtoH}, src, pos, n, []byte{0}) }
func dtod(dst, dpos, n, src, spos []byte) []byte {
	return cat([]byte{touchDtoD}, dst, dpos, n, src, spos, []byte{0})
}

// steps encodes forward steps, each a list of at most maxCalls touches.
func steps(calls ...[][]byte) []byte {
	out := []byte{byte(len(calls) - 1)}
	for _, c := range calls {
		out = append(out, byte(len(c)))
		out = append(out, slices.Concat(c...)...)
	}
	return out
}

// buildSeeds are FuzzBuildAndTouch's seeds.
func buildSeeds() []buildSeed {
	utilization := arena.DefaultGPUMemoryUtilization
	budget := int64(utilization * float64(fuzzCapacity))
	// logits of U8 that brings SmallPlan (1 + 3 + 2 MiB of buffers, a 4 MiB
	// slab) to exactly the budget for the discrete layout; the pool pads
	// logits' end to 256 B, so pooled it is past the budget.
	atBudget := budget - 7*mib
	return []buildSeed{
		{"valid small plan", baseSmall, nil, steps(
			[][]byte{
				memset(anBuffer(arena.HiddenStates), posStart, lenToEnd, 7),
				htod(anBuffer(arena.Logits), posMiddle, lenKiB(16), 3),
				dtod(anBuffer(arena.NormUnitW), posAfterStart(9), lenSmall(200), anBuffer(arena.HiddenStates), posStart),
				dtoh(anSlab(0), posBeforeEnd(10), lenToEnd),
			},
			[][]byte{
				htod(anSlab(0), posStart, lenSmall(255), 1),
				dtod(anSlab(0), posAfterStart(3), lenSmall(255), anSlab(0), posStart), // overlapping: refused
				dtod(anSlab(0), posAfterStart(3), lenSmall(2), anSlab(0), posStart),   // adjacent
			}), "builds"},
		{"valid qwen3-next plan, pool padding", baseQwen3Next, nil, steps(
			[][]byte{
				htod(anBuffer(arena.TokenIDs), posStart, lenToEnd, 5),
				memset(anBuffer(arena.TokenIDs), posAfterEnd(4), lenSmall(8), 9), // in the pool's padding
				memset(anBuffer(arena.TokenIDs), posEnd, lenKiB(1), 9),           // padding, then the next buffer
				dtoh(anBuffer(arena.SSMBA), posBeforeEnd(0), lenSmall(1)),
				memset(anPool, posStart, lenSmall(0), 1), // discrete: no pool, NULL
				memset(anPool, posEnd, lenZero, 1),
			}), "builds"},
		{"valid llama plan", baseLlama, nil, steps(
			[][]byte{
				memset([]byte{133, 0}, posStart, lenToEnd, 1),
				memset([]byte{133, 5}, posMiddle, lenPastEnd, 2),
				htod([]byte{133, 7}, posBeforeEnd(3), lenToEnd, 3),
				dtod([]byte{133, 9}, posStart, lenSmall(15), []byte{133, 10}, posStart),
			}), "builds"},
		{"negative-bytes buffer", baseSmall, cat(setBytes(arena.Residual, -mib), setBufferBytes(5*mib), setTotal(9*mib)), nil, "buffers[residual].bytes"},
		{"absent buffer with bytes", baseSmall, cat(setBytes(arena.Residual, mib), setBufferBytes(7*mib), setTotal(11*mib)), nil, "buffers[residual].absent"},
		{"total_bytes mismatch", baseSmall, setTotal(mib), nil, "total_bytes"},
		{"total_bytes MaxInt64", baseSmall, setTotal(math.MaxInt64), nil, "total_bytes"},
		{"buffer_bytes overflows", baseSmall, cat(setBytes(arena.Logits, math.MaxInt64), []byte{editFixTotals}), nil, "buffer_bytes"},
		{"shape product overflows", baseSmall, cat(present(arena.Logits, arena.BF16, 1<<62, 3), setBytes(arena.Logits, 3*mib), []byte{editFixTotals}), nil, "buffers[logits].bytes"},
		{"zero dimension", baseSmall, cat(present(arena.Logits, arena.BF16, 4, 512), []byte{editShape, byte(arena.Logits), 2}, opDim(0), opDim(512)), nil, "buffers[logits].shape"},
		{"unknown dtype", baseSmall, []byte{editDType, byte(arena.Logits), 200}, nil, "buffers[logits].bytes"},
		{"wrong buffer id", baseSmall, []byte{editID, byte(arena.Logits), byte(arena.Residual)}, nil, "buffers[9].id"},
		{"duplicate slab", baseSmall, cat(dupSlab(0), []byte{editFixTotals}), nil, "slabs[\"w\"].name"},
		{"unnamed slab", baseSmall, cat(addSlab(2, mib), []byte{editFixTotals}), nil, "slabs[1].name"},
		{"zero-byte slab", baseSmall, cat(addSlab(1, 0), []byte{editFixTotals}), nil, "slabs[\"v\"].bytes"},
		{"negative slab", baseSmall, cat(addSlab(1, -1), []byte{editFixTotals}), nil, "slabs[\"v\"].bytes"},
		{"no buffer present", baseSmall, cat(absent(arena.HiddenStates), absent(arena.Logits), absent(arena.NormUnitW)), nil, "buffers"},
		{"over-capacity buffer", baseSmall, present(arena.Logits, arena.BF16, 512, 307200), nil, "out of memory"},
		{"over-capacity slab", baseSmallNoSlab, cat(addSlab(1, fuzzCapacity), []byte{editFixTotals}), nil, "out of memory"},
		{"over-capacity plan from a config", baseQwen3NextFP8, nil, nil, "out of memory"},
		{"at the budget (pooled pads past it)", baseSmall, present(arena.Logits, arena.U8, atBudget), steps(
			[][]byte{
				memset(anBuffer(arena.Logits), posBeforeEnd(0), lenSmall(0), 4),
				memset(anBuffer(arena.Logits), posEnd, lenSmall(0), 4),
			}), "pooled out of memory"},
		{"one past the budget", baseSmall, present(arena.Logits, arena.U8, atBudget+1), nil, "out of memory"},
		{"edge ranges", baseSmall, nil, steps(
			[][]byte{
				memset(anNULL, posStart, lenZero, 1),
				memset(anNULL, posStart, lenSmall(0), 1),
				memset(anNULL, posStart, lenNeg(0), 1),
				memset(anBuffer(arena.Residual), posStart, lenSmall(0), 1), // absent: NULL
				memset(anBuffer(arena.HiddenStates), posEnd, lenZero, 1),
				memset(anBuffer(arena.HiddenStates), posBeforeEnd(0), lenSmall(1), 1),
			},
			[][]byte{
				memset(anBuffer(arena.HiddenStates), posBefore(0), lenSmall(3), 1),
				memset(anBuffer(arena.HiddenStates), posStart, lenMax, 1),
				memset(anBuffer(arena.HiddenStates), posStart, lenRaw(math.MinInt64), 1),
				htod(anBuffer(arena.Logits), posBeforeEnd(5), lenPastEnd, 2),
				dtoh(anSlab(0), posStart, lenPastEnd),
				dtod(anBuffer(arena.HiddenStates), posStart, lenSmall(9), anBuffer(arena.Logits), posEnd),
			},
			[][]byte{
				memset(anBuffer(arena.Logits), posRaw(1<<40), lenSmall(0), 1),
				memset(anBuffer(arena.Logits), posRaw(-1<<40), lenSmall(0), 1),
				dtod(anBuffer(arena.Logits), posBeforeEnd(0), lenSmall(1), anBuffer(arena.HiddenStates), posStart),
				dtod(anSlab(0), posStart, lenToEnd, anBuffer(arena.NormUnitW), posStart), // 4 MiB into 2 MiB
				memset(anPool, posStart, lenZero, 1),                                     // discrete: NULL
			}), "builds"},
	}
}
