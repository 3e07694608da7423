package kvcache

import (
	"errors"
	"slices"
	"testing"
)

// pendingPool is a pool of one full-attention group of 4-token blocks,
// with prefix caching.
func pendingPool(t *testing.T) *Pool {
	t.Helper()
	p, err := New(Config{Groups: []GroupConfig{{Name: "full", Kind: FullAttention, Blocks: 64, BlockSize: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if !p.PrefixCaching() {
		t.Fatal("a full-attention pool caches prefixes")
	}
	return p
}

func apply(t *testing.T, p *Pool, s Step) StepResult {
	t.Helper()
	r := p.Apply(s)
	if len(r.Errors) != 0 {
		t.Fatalf("%+v: %v", s, r.Errors[0].Err)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAppendPending decodes one sequence the way an overlapping scheduler
// does (each step appends the token the previous step samples as pending
// and names the one before it) and another the plain way, with the same
// tokens: they hold as many blocks throughout, and the prefix cache holds a
// block only once every id in it is known.
func TestAppendPending(t *testing.T) {
	tokens := []int32{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	async, sync := pendingPool(t), pendingPool(t)
	apply(t, async, Step{Admit: []Admit{{Seq: 1, Tokens: tokens[:3]}}})
	apply(t, sync, Step{Admit: []Admit{{Seq: 1, Tokens: tokens[:3]}}})
	// Step k computes token k: the plain scheduler appends it known; the
	// overlapping one appended it as pending in step k and names it in
	// step k+1 (Tokens: the one id, Pending: the next token).
	apply(t, async, Step{Append: []Append{{Seq: 1, Pending: 1}}})
	for k := 3; k < len(tokens); k++ {
		apply(t, sync, Step{Append: []Append{{Seq: 1, Tokens: tokens[k : k+1]}}})
		if k+1 < len(tokens) {
			apply(t, async, Step{Append: []Append{{Seq: 1, Tokens: tokens[k : k+1], Pending: 1}}})
		} else {
			apply(t, async, Step{Append: []Append{{Seq: 1, Tokens: tokens[k : k+1]}}}) // names the last, adds none
		}
		// The async pool holds one token more (the pending one).
		a, _ := async.BlockTable(1)
		s, _ := sync.BlockTable(1)
		held := min(k+2, len(tokens))
		if len(a[0]) != (held+3)/4 || len(s[0]) != (k+4)/4 {
			t.Fatalf("after token %d: %d blocks with pending appends (want %d), %d without (want %d)", k, len(a[0]), (held+3)/4, len(s[0]), (k+4)/4)
		}
		// The async pool knows ids up to token k (token k+1 pending): its
		// cached prefix of the whole sequence ends on the last block
		// those known ids fill.
		if got, want := async.CachedPrefix(tokens, nil), (k+1)/4*4; got != want {
			t.Fatalf("after naming token %d: %d tokens cached, want %d", k, got, want)
		}
	}
	if got, want := async.CachedPrefix(tokens, nil), sync.CachedPrefix(tokens, nil); got != want || got != 8 {
		t.Fatalf("cached prefix %d with pending appends, %d without; want 8 in both", got, want)
	}
}

// TestAppendPendingBlockWaitsForIDs fills a block with a pending token: it
// is not cached until an append names the token, and then it is cached
// under the named id, not a placeholder.
func TestAppendPendingBlockWaitsForIDs(t *testing.T) {
	p := pendingPool(t)
	apply(t, p, Step{Admit: []Admit{{Seq: 1, Tokens: []int32{1, 2, 3}}}})
	apply(t, p, Step{Append: []Append{{Seq: 1, Pending: 1}}})
	full := []int32{1, 2, 3, 4}
	if got := p.CachedPrefix(append(full, 9), nil); got != 0 {
		t.Fatalf("a block holding a pending token is cached: %d tokens hit", got)
	}
	apply(t, p, Step{Append: []Append{{Seq: 1, Tokens: []int32{4}}}})
	if got := p.CachedPrefix(append(full, 9), nil); got != 4 {
		t.Fatalf("after naming the pending token, %d tokens hit; want 4", got)
	}
	if got := p.CachedPrefix([]int32{1, 2, 3, 0, 9}, nil); got != 0 {
		t.Fatalf("the block is cached under another id: %d tokens hit", got)
	}
}

// TestForkPending: a sequence with a pending token is not forked (its
// copies would write different tokens into the slot they share) until an
// append names the token.
func TestForkPending(t *testing.T) {
	p := pendingPool(t)
	apply(t, p, Step{Admit: []Admit{{Seq: 1, Tokens: []int32{1, 2, 3}}}})
	apply(t, p, Step{Append: []Append{{Seq: 1, Pending: 1}}})
	r := p.Apply(Step{Fork: []Fork{{Parent: 1, Child: 2}}})
	var se *SequenceError
	if len(r.Errors) != 1 || !errors.Is(r.Errors[0].Err, ErrPendingTokens) || !errors.As(r.Errors[0].Err, &se) || se.Seq != 1 || p.Len() != 1 {
		t.Fatalf("fork with a pending token: errors %v, %d sequences; want ErrPendingTokens naming sequence 1, and 1 sequence", r.Errors, p.Len())
	}
	apply(t, p, Step{Append: []Append{{Seq: 1, Tokens: []int32{4}}}})
	apply(t, p, Step{Fork: []Fork{{Parent: 1, Child: 2}}})
	apply(t, p, Step{Append: []Append{{Seq: 1, Tokens: []int32{5}}, {Seq: 2, Tokens: []int32{6}}}})
	if p.Len() != 2 {
		t.Fatalf("%d sequences after the fork, want 2", p.Len())
	}
}

// TestAppendPendingRefused: a negative pending count and an append of
// nothing are refused with their sentinels, and change nothing.
func TestAppendPendingRefused(t *testing.T) {
	p := pendingPool(t)
	apply(t, p, Step{Admit: []Admit{{Seq: 1, Tokens: []int32{1, 2, 3}}}})
	before, _ := p.BlockTable(1)
	before = [][]int32{slices.Clone(before[0])}
	for _, c := range []struct {
		a    Append
		want error
	}{
		{Append{Seq: 1, Tokens: []int32{4}, Pending: -1}, ErrNegativePending},
		{Append{Seq: 1}, ErrNoTokens},
	} {
		r := p.Apply(Step{Append: []Append{c.a}})
		var se *SequenceError
		if len(r.Errors) != 1 || !errors.Is(r.Errors[0].Err, c.want) || !errors.As(r.Errors[0].Err, &se) || se.Seq != 1 {
			t.Fatalf("%+v: errors %v, want one *SequenceError of sequence 1 that is %v", c.a, r.Errors, c.want)
		}
		after, _ := p.BlockTable(1)
		if !slices.Equal(after[0], before[0]) {
			t.Fatalf("%+v: the refused append changed the table %v to %v", c.a, before[0], after[0])
		}
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}
