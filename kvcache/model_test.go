package kvcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// modelConfigs are the pools the model-based test and the fuzz target
// drive: small, so that eviction and exhaustion happen often.
var modelConfigs = [][]GroupConfig{
	{{Name: "full", Kind: FullAttention, Blocks: 12, BlockSize: 2}},
	{
		{Name: "full", Kind: FullAttention, Blocks: 14, BlockSize: 2},
		{Name: "sliding", Kind: SlidingWindow, Blocks: 10, BlockSize: 2, Window: 5},
	},
	{{Name: "sliding", Kind: SlidingWindow, Blocks: 10, BlockSize: 2, Window: 3}},
	{{Name: "sliding", Kind: SlidingWindow, Blocks: 8, BlockSize: 3, Window: 1}},
	{
		{Name: "full", Kind: FullAttention, Blocks: 12, BlockSize: 2},
		{Name: "sliding", Kind: SlidingWindow, Blocks: 9, BlockSize: 4, Window: 6},
	},
	{
		{Name: "full-a", Kind: FullAttention, Blocks: 9, BlockSize: 3},
		{Name: "full-b", Kind: FullAttention, Blocks: 12, BlockSize: 3},
	},
	{
		{Name: "state", Kind: State, Blocks: 3},
		{Name: "full", Kind: FullAttention, Blocks: 12, BlockSize: 2},
	},
	{{Name: "state", Kind: State, Blocks: 4}},
}

// modelHashes are the block hashes the model-based test runs under: the
// pool's own, and two that collide on purpose. Results must not depend on
// the hash.
var modelHashes = []struct {
	name string
	hash HashFunc
}{
	{"seeded", nil},
	{"constant", func(uint64, []int32, []byte) uint64 { return 0 }},
	{"first-token-parity", func(parent uint64, tokens []int32, _ []byte) uint64 {
		return parent ^ uint64(tokens[0]&1)
	}},
}

// chooser picks the driver's next choice among n; false when it has no
// more (a fuzz input ran out).
type chooser func(n int) (int, bool)

// driver runs one op stream against a Pool and the reference and compares
// them after every step.
type driver struct {
	pool   *Pool
	ref    *refPool
	choose chooser
	next   SeqID
	// prompts are shared prefixes new prompts start from.
	prompts [][]int32
}

func newDriver(t testing.TB, groups []GroupConfig, hash HashFunc, choose chooser) *driver {
	pool, err := New(Config{Groups: groups, Hash: hash})
	if err != nil {
		t.Fatal(err)
	}
	return &driver{
		pool: pool, ref: newRefPool(groups), choose: choose, next: 1,
		prompts: [][]int32{{1, 2, 1, 2, 1, 2, 1, 2}, {1, 2, 1, 2, 0, 0}, {2, 1, 2}, {0, 0, 0, 0, 0, 0, 0}},
	}
}

// pick returns a choice among n, or 0 when the input ran out.
func (d *driver) pick(n int) int {
	c, _ := d.choose(n)
	return c
}

// live returns the reference's sequences, sorted.
func (d *driver) live() []SeqID {
	ids := make([]SeqID, 0, len(d.ref.seqs))
	for id := range d.ref.seqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// someSeq returns a live sequence most of the time, else an unknown id.
func (d *driver) someSeq() SeqID {
	live := d.live()
	if len(live) == 0 || d.pick(8) == 0 {
		return d.next + 100
	}
	return live[d.pick(len(live))]
}

// newSeq returns a fresh id most of the time, else a live one.
func (d *driver) newSeq() SeqID {
	if live := d.live(); len(live) > 0 && d.pick(10) == 0 {
		return live[d.pick(len(live))]
	}
	d.next++
	return d.next
}

func (d *driver) tokens(max int) []int32 {
	n := d.pick(max + 1)
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(d.pick(3))
	}
	return t
}

// step builds one random step.
func (d *driver) step() Step {
	var s Step
	for range d.pick(3) {
		s.Free = append(s.Free, d.someSeq())
	}
	for range d.pick(2) {
		s.Fork = append(s.Fork, Fork{Parent: d.someSeq(), Child: d.newSeq()})
	}
	for range d.pick(4) {
		toks := d.tokens(3)
		if len(toks) == 0 && d.pick(4) > 0 {
			toks = []int32{int32(d.pick(3))}
		}
		s.Append = append(s.Append, Append{Seq: d.someSeq(), Tokens: toks})
	}
	for range d.pick(3) {
		base := d.prompts[d.pick(len(d.prompts))]
		prompt := append(slices.Clone(base[:d.pick(len(base)+1)]), d.tokens(6)...)
		var extra []byte
		if d.pick(5) == 0 {
			extra = []byte("lora-7")
		}
		a := Admit{Seq: d.newSeq(), Tokens: prompt, Extra: extra}
		if d.pick(3) == 0 { // chunked prefill: the rest of the prompt comes by appends
			a.MaxNewTokens = 1 + d.pick(3)
		}
		s.Admit = append(s.Admit, a)
	}
	return s
}

// run drives steps until the chooser runs out or max steps are done.
func (d *driver) run(t testing.TB, max int) {
	for i := 0; i < max; i++ {
		if _, ok := d.choose(1); !ok {
			return
		}
		switch d.pick(25) {
		case 0:
			d.compareErr(t, i, "ResetPrefixCache", d.pool.ResetPrefixCache(), d.ref.reset())
		case 1:
			var s Step
			s.Free = d.live()
			d.apply(t, i, s)
		default:
			d.apply(t, i, d.step())
		}
		d.compareState(t, i)
	}
}

func (d *driver) apply(t testing.TB, i int, s Step) {
	got, want := d.pool.Apply(s), d.ref.apply(s)
	if !slices.Equal(got.CachedTokens, want.CachedTokens) || !slices.Equal(got.Copies, want.Copies) ||
		!slices.Equal(got.Counts, want.Counts) || len(got.Errors) != len(want.Errors) {
		t.Fatalf("step %d %+v:\n got %+v\nwant %+v", i, s, got, want)
	}
	for k := range got.Errors {
		g, w := got.Errors[k], want.Errors[k]
		if g.Op != w.Op || g.Index != w.Index {
			t.Fatalf("step %d: error %d is %s[%d], want %s[%d]", i, k, g.Op, g.Index, w.Op, w.Index)
		}
		d.compareErr(t, i, fmt.Sprintf("%s[%d]", g.Op, g.Index), g.Err, w.Err)
	}
}

// compareErr compares a pool error with the reference's by type and
// fields.
func (d *driver) compareErr(t testing.TB, i int, what string, got, want error) {
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("step %d %s: got error %v, want %v", i, what, got, want)
	}
	for _, sentinel := range []error{ErrExhausted, ErrUnknownSequence, ErrDuplicateSequence, ErrNoTokens, ErrCacheInUse} {
		if errors.Is(got, sentinel) != errors.Is(want, sentinel) {
			t.Fatalf("step %d %s: errors.Is(%v, %v) differs", i, what, got, sentinel)
		}
	}
}

// compareState compares every table, the stats and a lookup, and checks
// the pool's invariants.
func (d *driver) compareState(t testing.TB, i int) {
	if err := d.pool.Check(); err != nil {
		t.Fatalf("step %d: %v", i, err)
	}
	if d.pool.Len() != len(d.ref.seqs) {
		t.Fatalf("step %d: pool holds %d sequences, reference %d", i, d.pool.Len(), len(d.ref.seqs))
	}
	for id, s := range d.ref.seqs {
		got, err := d.pool.BlockTable(id)
		if err != nil || !reflect.DeepEqual(got, s.tables) {
			t.Fatalf("step %d: sequence %d table %v (%v), want %v", i, id, got, err, s.tables)
		}
	}
	if g, w := d.pool.PrefixStats(), d.ref.stats; g != w {
		t.Fatalf("step %d: stats %+v, want %+v", i, g, w)
	}
	probe := d.prompts[d.pick(len(d.prompts))]
	if g, w := d.pool.CachedPrefix(probe, nil), d.ref.hit(probe, ""); g != w {
		t.Fatalf("step %d: CachedPrefix(%v) = %d, want %d", i, probe, g, w)
	}
}

// TestPoolModel drives random sequence lifecycles (admissions with shared
// prefixes, appends, forks, frees, resets) against the reference on every
// config and hash, comparing every result, table, count and error, and
// checking the invariants after every step.
func TestPoolModel(t *testing.T) {
	steps, seeds := 400, 4
	if testing.Short() {
		steps, seeds = 120, 1
	}
	for ci, groups := range modelConfigs {
		for _, h := range modelHashes {
			for seed := range seeds {
				t.Run(fmt.Sprintf("config%d/%s/seed%d", ci, h.name, seed), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(seed), uint64(ci)))
					d := newDriver(t, groups, h.hash, func(n int) (int, bool) { return r.IntN(n), true })
					d.run(t, steps)
					st := d.pool.PrefixStats()
					if d.pool.PrefixCaching() && (st.Hits == 0 || st.Queries == 0) {
						t.Errorf("no prefix hits in %d steps: %+v", steps, st)
					}
				})
			}
		}
	}
}
