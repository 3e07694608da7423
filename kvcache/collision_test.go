package kvcache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCollidingHashNeverShares admits, appends to and frees sequences of
// random prompts under a hash that sends every block to one key, and
// checks after every step that two sequences hold the same block at a
// position only when their tokens (and extra keys) up to there are equal.
func TestCollidingHashNeverShares(t *testing.T) {
	for name, hash := range map[string]HashFunc{
		"constant":   func(uint64, []int32, []byte) uint64 { return 0 },
		"token-only": func(_ uint64, tokens []int32, _ []byte) uint64 { return uint64(tokens[0]) },
	} {
		t.Run(name, func(t *testing.T) {
			const bs = 3
			p, err := New(Config{Hash: hash, Groups: []GroupConfig{
				{Name: "full", Kind: FullAttention, Blocks: 40, BlockSize: bs},
				{Name: "sliding", Kind: SlidingWindow, Blocks: 40, BlockSize: bs, Window: 4},
			}})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 7))
			tokens := map[SeqID][]int32{}
			extra := map[SeqID]string{}
			shared, hits := 0, 0
			for step := range 300 {
				var s Step
				id := SeqID(step + 1)
				prompt := make([]int32, 1+r.IntN(10))
				for i := range prompt {
					prompt[i] = int32(r.IntN(2))
				}
				ex := []string{"", "a"}[r.IntN(2)]
				s.Admit = append(s.Admit, Admit{Seq: id, Tokens: prompt, Extra: []byte(ex)})
				for live := range tokens {
					if r.IntN(4) == 0 {
						s.Free = append(s.Free, live)
					} else if r.IntN(2) == 0 {
						s.Append = append(s.Append, Append{Seq: live, Tokens: []int32{int32(r.IntN(2))}})
					}
				}
				res := p.Apply(s)
				failed := map[Op]map[int]bool{OpAppend: {}, OpAdmit: {}}
				for _, e := range res.Errors {
					failed[e.Op][e.Index] = true
				}
				for _, f := range s.Free {
					delete(tokens, f)
				}
				for i, a := range s.Append {
					if !failed[OpAppend][i] {
						tokens[a.Seq] = append(tokens[a.Seq], a.Tokens...)
					}
				}
				if !failed[OpAdmit][0] {
					tokens[id], extra[id] = slices.Clone(prompt), ex
					if res.CachedTokens[0] > 0 {
						hits++
					}
				}
				shared += checkSharing(t, p, tokens, extra, bs)
				if err := p.Check(); err != nil {
					t.Fatal(err)
				}
			}
			if shared == 0 || hits == 0 {
				t.Fatalf("no block was ever shared (%d) or hit (%d): the test proves nothing", shared, hits)
			}
		})
	}
}

// checkSharing fails when two sequences share a block at a position
// without sharing the prefix through it, and returns how many shared
// block pairs it saw.
func checkSharing(t *testing.T, p *Pool, tokens map[SeqID][]int32, extra map[SeqID]string, bs int) int {
	t.Helper()
	type holder struct {
		seq SeqID
		pos int
	}
	shared := 0
	for g := range 2 {
		owner := map[int32]holder{}
		for id := range tokens {
			tables, err := p.BlockTable(id)
			if err != nil {
				t.Fatal(err)
			}
			for pos, b := range tables[g] {
				if b == NullBlock {
					continue
				}
				o, seen := owner[b]
				if !seen {
					owner[b] = holder{id, pos}
					continue
				}
				shared++
				end := min((pos+1)*bs, len(tokens[id]), len(tokens[o.seq]))
				if o.pos != pos || extra[o.seq] != extra[id] || !slices.Equal(tokens[o.seq][:end], tokens[id][:end]) {
					t.Fatalf("group %d block %d: sequence %d (%v, %q) at %d and sequence %d (%v, %q) at %d",
						g, b, o.seq, tokens[o.seq], extra[o.seq], o.pos, id, tokens[id], extra[id], pos)
				}
			}
		}
	}
	return shared
}
