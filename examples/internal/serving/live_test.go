package serving

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpuarena/gpuarena/kvcache"
)

// liveForward is the tests' forward: it knows every request's tokens (its
// prompt, then what it sampled), checks that each sequence of a batch
// computes exactly its next tokens at their positions — the chunks of a
// prompt contiguous, an admission starting at its cached prefix — and
// samples a token that is a hash of all the sequence's tokens up to the
// step's last position. Chunking, batching and preemption therefore cannot
// change an output unless they compute the wrong tokens.
type liveForward struct {
	t      *testing.T
	tokens map[Key][]int32
	next   map[kvcache.SeqID]int // the position each running sequence computes next
	// pending counts the PendingTokens decoded.
	pending int
}

func newLiveForward(t *testing.T) *liveForward {
	return &liveForward{t: t, tokens: map[Key][]int32{}, next: map[kvcache.SeqID]int{}}
}

// add records request k's prompt.
func (f *liveForward) add(k Key, prompt []int32) { f.tokens[k] = slices.Clone(prompt) }

// run checks b and returns one token per sequence. prev and prevOut are
// the batch scheduled before b and its tokens, not yet committed when b
// was scheduled (overlapped steps), or empty: b's PendingTokens are
// prevOut's, as a forward on the device reads them.
func (f *liveForward) run(step int, b, prev Batch, prevOut []int32) []int32 {
	f.t.Helper()
	out := make([]int32, len(b.Seqs))
	for i, bs := range b.Seqs {
		all := f.tokens[bs.Key]
		if slices.Equal(bs.Tokens, []int32{PendingToken}) {
			r := bs.PrevRow
			if r < 0 || r >= len(prevOut) || prev.Seqs[r].Key != bs.Key || !prev.Seqs[r].Sample || bs.Pos != len(all) {
				f.t.Fatalf("step %d: request %d decodes a pending token of row %d at %d, after %d tokens; the previous batch has %d rows", step, bs.Key, r, bs.Pos, len(all), len(prev.Seqs))
			}
			all = append(slices.Clone(all), prevOut[r])
			f.pending++
			bs.Tokens = all[bs.Pos:]
		}
		want, ok := f.next[bs.Seq]
		if !ok { // an admission: it starts after its cached prefix
			want = bs.CachedTokens
		}
		end := bs.Pos + len(bs.Tokens)
		switch {
		case bs.Pos != want || len(bs.Tokens) == 0 || end > len(all):
			f.t.Fatalf("step %d: request %d (seq %d) computes positions %d..%d, want from %d, of %d tokens", step, bs.Key, bs.Seq, bs.Pos, end-1, want, len(all))
		case !slices.Equal(bs.Tokens, all[bs.Pos:end]):
			f.t.Fatalf("step %d: request %d computes %v at %d, its tokens there are %v", step, bs.Key, bs.Tokens, bs.Pos, all[bs.Pos:end])
		case bs.Sample != (end == len(all)):
			f.t.Fatalf("step %d: request %d: sample %v after position %d of %d tokens", step, bs.Key, bs.Sample, end-1, len(all))
		}
		f.next[bs.Seq] = end
		h := fnv.New32a()
		_ = binary.Write(h, binary.LittleEndian, all[:end])
		out[i] = int32(h.Sum32() % 1000)
	}
	return out
}

// commit records the sampled tokens.
func (f *liveForward) commit(outs []Output) {
	for _, o := range outs {
		f.tokens[o.Key] = append(f.tokens[o.Key], o.Token)
	}
}

// checkTables compares the block tables Schedule had written with the
// pool's, row by row, and checks that each row covers exactly the tokens
// computed by the end of the step.
func checkTables(t *testing.T, step int, kv poolKV, tables *Tables, b Batch) {
	t.Helper()
	for r, bs := range b.Seqs {
		pool, err := kv.pool.BlockTable(bs.Seq)
		if err != nil {
			t.Fatalf("step %d: row %d: %v", step, r, err)
		}
		row := make([]int32, tables.Shape.Width)
		for i := range row {
			row[i] = int32(binary.LittleEndian.Uint32(tables.Dst[4*(r*tables.Shape.Width+i):]))
		}
		blocks := (bs.Pos + len(bs.Tokens) + 15) / 16
		if len(pool[0]) != blocks || !slices.Equal(row[:blocks], pool[0]) || slices.ContainsFunc(row[blocks:], func(v int32) bool { return v != kvcache.NullBlock }) {
			t.Fatalf("step %d: row %d (seq %d, %d tokens computed): written %v, pool %v", step, r, bs.Seq, bs.Pos+len(bs.Tokens), row, pool[0])
		}
	}
	for i := len(b.Seqs) * tables.Shape.Width * 4; i < len(tables.Dst); i++ {
		if tables.Dst[i] != 0 {
			t.Fatalf("step %d: padding byte %d is %d", step, i, tables.Dst[i])
		}
	}
}

// A random mix of arrivals, cancellations, prompts longer than the step's
// budget and a pool small enough to preempt: every request not cancelled
// gets exactly MaxTokens tokens, each computed from the right tokens at
// the right positions (liveForward); the block tables written with each
// step are the pool's; every block comes back; a step never passes
// max_batch_size or max_batch_tokens.
//
// Overlapped, each step is scheduled before the previous one is committed,
// as a server does to hide the scheduler behind the forward: the same
// holds, and every pending token a step decodes is the one the step before
// it sampled for that request.
func TestLiveModel(t *testing.T) {
	for _, c := range []struct {
		blocks, budget int
		overlap        bool
	}{{40, 512, false}, {4000, 512, false}, {60, 64, false}, {4000, 48, false}, {40, 512, true}, {4000, 512, true}, {60, 64, true}, {4000, 48, true}} {
		t.Run(fmt.Sprintf("blocks%d/budget%d/overlap=%v", c.blocks, c.budget, c.overlap), func(t *testing.T) {
			kv := newPoolKV(t, c.blocks)
			opts := Options{MaxBatchSize: 8, MaxBatchTokens: c.budget, MaxSeqLen: 400, Vocab: 1000}
			s, err := NewLive(opts)
			if err != nil {
				t.Fatal(err)
			}
			want := map[Key]int{}
			prompts := map[Key]int{}
			var tables [2]*Tables // a step's while the next is scheduled
			for i := range tables {
				tables[i] = &Tables{Shape: kvcache.TableShape{Rows: 8, Width: 25}, Dst: make([]byte, 4*8*25)}
			}
			f := newLiveForward(t)
			var prev Batch // scheduled, not committed (overlap)
			var prevOut []int32
			commit := func(b Batch, toks []int32) {
				outs, err := s.Commit(b, toks)
				if err != nil {
					t.Fatal(err)
				}
				f.commit(outs)
				for _, o := range outs {
					if got := len(f.tokens[o.Key]) - prompts[o.Key]; o.Finished != (got == want[o.Key]) {
						t.Fatalf("request %d: finished %v after %d of %d tokens", o.Key, o.Finished, got, want[o.Key])
					}
				}
			}
			rng := rand.New(rand.NewPCG(7, uint64(c.blocks*c.budget)))
			cancelled := map[Key]bool{}
			next := Key(1)
			ctx := context.Background()
			for step := 0; step < 5000 && (next <= 60 || !s.Idle() || prevOut != nil); step++ {
				for next <= 60 && rng.IntN(3) == 0 {
					p := 1 + rng.IntN(200)
					prompt := make([]int32, p)
					shared := int32(rng.IntN(2)) // two 32-token prefixes
					for i := range prompt {
						prompt[i] = shared
						if i >= 32 {
							prompt[i] = int32(rng.IntN(1000))
						}
					}
					n := 1 + rng.IntN(60)
					if err := s.Add(next, LiveRequest{Prompt: prompt, MaxTokens: n}); err != nil {
						t.Fatal(err)
					}
					f.add(next, prompt)
					want[next], prompts[next] = n, p
					next++
				}
				if rng.IntN(20) == 0 {
					k := Key(1 + rng.IntN(int(next)))
					if s.Cancel(k) {
						cancelled[k] = true
					}
				}
				tb := tables[step%2]
				b, err := s.Schedule(ctx, kv, tb)
				if err != nil {
					t.Fatal(err)
				}
				if len(b.Unservable) > 0 {
					t.Fatalf("step %d: unservable %v", step, b.Unservable)
				}
				sum := 0
				for _, bs := range b.Seqs {
					sum += len(bs.Tokens)
				}
				if len(b.Seqs) > opts.MaxBatchSize || sum > opts.MaxBatchTokens || sum != b.Tokens {
					t.Fatalf("step %d: %d sequences, %d tokens (batch says %d)", step, len(b.Seqs), sum, b.Tokens)
				}
				checkTables(t, step, kv, tb, b)
				out := f.run(step, b, prev, prevOut)
				if !c.overlap {
					commit(b, out)
					continue
				}
				if prevOut != nil {
					commit(prev, prevOut)
				}
				prev, prevOut = b, out
				if s.Idle() {
					commit(prev, prevOut)
					prev, prevOut = Batch{}, nil
				}
			}
			if !s.Idle() || kv.pool.Len() != 0 {
				t.Fatalf("not idle (%d waiting, %d running) or %d sequences in the pool", s.Waiting(), s.Running(), kv.pool.Len())
			}
			for k, n := range want {
				if got := len(f.tokens[k]) - prompts[k]; !cancelled[k] && got != n {
					t.Fatalf("request %d: %d tokens, want %d", k, got, n)
				}
			}
			st := s.Stats()
			if c.overlap != (f.pending > 0) {
				t.Fatalf("overlap %v: %d pending tokens decoded", c.overlap, f.pending)
			}
			switch {
			case c.blocks < 100 && st.Preemptions == 0:
				t.Fatalf("no preemption: %+v", st)
			case c.blocks > 100 && (st.Preemptions != 0 || st.CachedTokens == 0):
				t.Fatalf("%+v; want no preemption and prefix hits", st)
			case c.budget < 200 && st.Chunks == 0:
				t.Fatalf("prompts up to 200 tokens on a budget of %d: no chunk: %+v", c.budget, st)
			}
		})
	}
}

// liveRun serves reqs (all added at once) to the end and returns each
// request's output and the most tokens one step computed; each step it
// checks that a request that was decoding is in the batch again.
func liveRun(t *testing.T, opts Options, reqs []LiveRequest) (map[Key][]int32, Stats, int) {
	t.Helper()
	kv := newPoolKV(t, 4000)
	s, err := NewLive(opts)
	if err != nil {
		t.Fatal(err)
	}
	f := newLiveForward(t)
	for i, r := range reqs {
		if err := s.Add(Key(i), r); err != nil {
			t.Fatal(err)
		}
		f.add(Key(i), r.Prompt)
	}
	most := 0
	decoding := map[Key]bool{}
	for step := 0; !s.Idle(); step++ {
		if step > 1000 {
			t.Fatal("not idle after 1000 steps")
		}
		b, err := s.Schedule(context.Background(), kv, nil)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, b.Tokens)
		in := map[Key]bool{}
		for _, bs := range b.Seqs {
			in[bs.Key] = true
		}
		for k := range decoding {
			if !in[k] {
				t.Fatalf("step %d: request %d decoded last step and is not in this one", step, k)
			}
		}
		outs, err := s.Commit(b, f.run(step, b, Batch{}, nil))
		if err != nil {
			t.Fatal(err)
		}
		f.commit(outs)
		clear(decoding)
		for _, o := range outs {
			if !o.Finished {
				decoding[o.Key] = true
			}
		}
	}
	out := map[Key][]int32{}
	for i, r := range reqs {
		out[Key(i)] = f.tokens[Key(i)][len(r.Prompt):]
	}
	return out, s.Stats(), most
}

// A prompt three times max_batch_tokens is prefilled over several steps,
// never more than max_batch_tokens a step, while the requests already
// decoding get a token every step; its output is the one it gets when
// max_batch_tokens holds it whole.
func TestLiveChunkedPrefill(t *testing.T) {
	const budget = 64
	prompt := func(n int, seed int32) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = (seed*31 + int32(i)*7) % 1000
		}
		return p
	}
	reqs := []LiveRequest{
		{Prompt: prompt(5, 1), MaxTokens: 40},
		{Prompt: prompt(9, 2), MaxTokens: 40},
		{Prompt: prompt(3*budget, 3), MaxTokens: 20},
		{Prompt: prompt(30, 4), MaxTokens: 10},
	}
	chunked, st, most := liveRun(t, Options{MaxBatchSize: 8, MaxBatchTokens: budget, MaxSeqLen: 512, Vocab: 1000}, reqs)
	whole, wst, _ := liveRun(t, Options{MaxBatchSize: 8, MaxBatchTokens: 4096, MaxSeqLen: 512, Vocab: 1000}, reqs)
	if most > budget || st.Chunks < 3 || wst.Chunks != 0 {
		t.Fatalf("budget %d: a step computed %d tokens, %d chunks (%d with a budget holding every prompt); want ≤ %d, ≥ 3 and 0", budget, most, st.Chunks, wst.Chunks, budget)
	}
	for k, out := range whole {
		if len(out) != reqs[k].MaxTokens || !slices.Equal(chunked[k], out) {
			t.Fatalf("request %d: %v chunked, %v whole", k, chunked[k], out)
		}
	}
}

// Add refuses what the limits cannot serve, with the limit: max_seq_len,
// whatever max_batch_tokens is.
func TestLiveAddRefuses(t *testing.T) {
	s, err := NewLive(Options{MaxBatchSize: 4, MaxBatchTokens: 16, MaxSeqLen: 64, Vocab: 10})
	if err != nil {
		t.Fatal(err)
	}
	var le *LengthError
	if err := s.Add(1, LiveRequest{Prompt: make([]int32, 60), MaxTokens: 5}); !errors.As(err, &le) || le.Limit != 64 || !errors.Is(err, ErrTooLong) {
		t.Fatalf("65 tokens past 64: %v", err)
	}
	if err := s.Add(4, LiveRequest{Prompt: make([]int32, 60), MaxTokens: 4}); err != nil {
		t.Fatalf("64 tokens, max_batch_tokens 16: %v", err)
	}
	for name, r := range map[string]LiveRequest{"empty": {MaxTokens: 1}, "no tokens": {Prompt: []int32{1}}, "id": {Prompt: []int32{10}, MaxTokens: 1}} {
		if err := s.Add(2, r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := s.Add(3, LiveRequest{Prompt: []int32{1}, MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(3, LiveRequest{Prompt: []int32{1}, MaxTokens: 1}); err == nil {
		t.Fatal("a live key added twice")
	}
}

// A request larger than the whole pool is dropped as unservable — whether
// its first chunk does not fit, or a later chunk does not while it runs
// alone — and the requests behind it are served.
func TestLiveUnservable(t *testing.T) {
	for _, budget := range []int{1024, 32} {
		s, err := NewLive(Options{MaxBatchSize: 4, MaxBatchTokens: budget, MaxSeqLen: 1024, Vocab: 100})
		if err != nil {
			t.Fatal(err)
		}
		kv := newPoolKV(t, 8)
		if err := s.Add(1, LiveRequest{Prompt: make([]int32, 200), MaxTokens: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(2, LiveRequest{Prompt: make([]int32, 20), MaxTokens: 1}); err != nil {
			t.Fatal(err)
		}
		var unservable []Key
		for steps := 0; !s.Idle(); steps++ {
			if steps > 100 {
				t.Fatal("not idle after 100 steps")
			}
			b, err := s.Schedule(context.Background(), kv, nil)
			if err != nil {
				t.Fatal(err)
			}
			unservable = append(unservable, b.Unservable...)
			if _, err := s.Commit(b, make([]int32, len(b.Seqs))); err != nil {
				t.Fatal(err)
			}
		}
		if st := s.Stats(); st.Finished != 1 || len(unservable) != 1 || unservable[0] != 1 || kv.pool.Len() != 0 {
			t.Fatalf("budget %d: %+v, unservable %v, %d sequences in the pool: want request 2 finished, request 1 unservable", budget, st, unservable, kv.pool.Len())
		}
	}
}
