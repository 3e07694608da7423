package serving

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
)

// liveToken is the test's forward: the next token of a sequence is a
// function of its request and position only, so a preempted and
// recomputed sequence must produce the same tokens.
func liveToken(k Key, pos int) int32 { return tokenID("live", int(k)*100000+pos, 1000) }

// A random mix of arrivals, cancellations and a pool small enough to
// preempt: every request not cancelled gets exactly MaxTokens tokens,
// each the one its position calls for; every block comes back; the
// batch never passes max_batch_size or max_batch_tokens.
func TestLiveModel(t *testing.T) {
	for _, blocks := range []int{40, 4000} {
		kv := newPoolKV(t, blocks)
		opts := Options{MaxBatchSize: 8, MaxBatchTokens: 512, MaxSeqLen: 400, Vocab: 1000}
		s, err := NewLive(opts)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, uint64(blocks)))
		got := map[Key][]int32{}
		want := map[Key]int{}
		prompts := map[Key]int{}
		cancelled := map[Key]bool{}
		next := Key(1)
		ctx := context.Background()
		for step := 0; step < 3000 && (next <= 60 || !s.Idle()); step++ {
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
				want[next], prompts[next] = n, p
				next++
			}
			if rng.IntN(20) == 0 {
				k := Key(1 + rng.IntN(int(next)))
				if s.Cancel(k) {
					cancelled[k] = true
				}
			}
			b, err := s.Schedule(ctx, kv)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Unservable) > 0 {
				t.Fatalf("step %d: unservable %v on %d blocks", step, b.Unservable, blocks)
			}
			tokens, sum := make([]int32, len(b.Seqs)), 0
			for i, bs := range b.Seqs {
				sum += len(bs.Tokens)
				tokens[i] = liveToken(bs.Key, bs.Pos+len(bs.Tokens))
			}
			if len(b.Seqs) > opts.MaxBatchSize || sum > opts.MaxBatchTokens {
				t.Fatalf("step %d: %d sequences, %d tokens", step, len(b.Seqs), sum)
			}
			outs, err := s.Commit(b, tokens)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				got[o.Key] = append(got[o.Key], o.Token)
				if o.Finished != (len(got[o.Key]) == want[o.Key]) {
					t.Fatalf("request %d: finished %v after %d of %d tokens", o.Key, o.Finished, len(got[o.Key]), want[o.Key])
				}
			}
		}
		if !s.Idle() || kv.pool.Len() != 0 {
			t.Fatalf("%d blocks: not idle (%d waiting, %d running) or %d sequences in the pool", blocks, s.Waiting(), s.Running(), kv.pool.Len())
		}
		for k, n := range want {
			if cancelled[k] {
				continue
			}
			if len(got[k]) != n {
				t.Fatalf("request %d: %d tokens, want %d", k, len(got[k]), n)
			}
			for i, tok := range got[k] {
				if w := liveToken(k, prompts[k]+i); tok != w {
					t.Fatalf("request %d token %d: %d, want %d (recompute changed it)", k, i, tok, w)
				}
			}
		}
		st := s.Stats()
		if blocks == 40 && st.Preemptions == 0 {
			t.Fatalf("40 blocks: no preemption: %+v", st)
		}
		if blocks == 4000 && (st.Preemptions != 0 || st.CachedTokens == 0) {
			t.Fatalf("4000 blocks: %+v; want no preemption and prefix hits", st)
		}
	}
}

// Add refuses what the limits cannot serve, with the limit.
func TestLiveAddRefuses(t *testing.T) {
	s, err := NewLive(Options{MaxBatchSize: 4, MaxBatchTokens: 100, MaxSeqLen: 64, Vocab: 10})
	if err != nil {
		t.Fatal(err)
	}
	var le *LengthError
	if err := s.Add(1, LiveRequest{Prompt: make([]int32, 60), MaxTokens: 5}); !errors.As(err, &le) || le.Limit != 64 || !errors.Is(err, ErrTooLong) {
		t.Fatalf("65 tokens past 64: %v", err)
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

// A prompt larger than the whole pool is dropped as unservable, and the
// requests behind it are served.
func TestLiveUnservable(t *testing.T) {
	s, err := NewLive(Options{MaxBatchSize: 4, MaxBatchTokens: 1024, MaxSeqLen: 1024, Vocab: 100})
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
		b, err := s.Schedule(context.Background(), kv)
		if err != nil {
			t.Fatal(err)
		}
		unservable = append(unservable, b.Unservable...)
		if _, err := s.Commit(b, make([]int32, len(b.Seqs))); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Finished != 1 || len(unservable) != 1 || unservable[0] != 1 {
		t.Fatalf("%+v, unservable %v: want request 2 finished, request 1 unservable", st, unservable)
	}
}
