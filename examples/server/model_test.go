package main

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"testing"

	"github.com/gpuarena/gpuarena/kernels"
)

// referenceNext is the stand-in model's next token computed on the host,
// apart from the engine: FNV-1a of the RMSNorm (kernels.RMSNormBF16, unit
// weight as offset-from-1 zeros: a server started with --config) of the
// stand-in embedding of token at pos, then the seed.
func referenceNext(m *stepModel, token int32, pos int, seed uint64) int32 {
	row := make([]byte, 2*m.cols)
	embed(row, token, pos)
	x, w, out := make([]uint16, m.cols), make([]uint16, m.cols), make([]uint16, m.cols)
	for i := range x {
		x[i] = binary.LittleEndian.Uint16(row[2*i:])
	}
	kernels.RMSNormBF16(out, x, w, 1, int(m.cols), m.eps, true)
	h := fnv.New64a()
	_ = binary.Write(h, binary.LittleEndian, out)
	_ = binary.Write(h, binary.LittleEndian, seed)
	return wordBase + int32(h.Sum64()%uint64(len(words)))
}

// Requests served together, with steps overlapped (each decode takes its
// input token from the forward before it on the GPU thread, row by row,
// while sequences join and finish around it), produce exactly the text the
// stand-in model gives computed on the host one token at a time.
func TestOutputsMatchHostReference(t *testing.T) {
	ts := startTestServer(t, 4000)
	if ts.engine.model.weight == 0 || !ts.engine.model.offset {
		t.Fatal("a --config server normalises with norm_unit_w as an offset-from-1 weight")
	}
	reqs := []struct {
		prompt    string
		maxTokens int
		seed      uint64
	}{{"The ledger says", 5, 1}, {"every byte", 23, 2}, {"is accounted for", 9, 3}, {"The ledger says", 16, 4}}
	got := make([]completion, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			body := fmt.Sprintf(`{"prompt": %q, "max_tokens": %d, "n": 2, "seed": %d}`, r.prompt, r.maxTokens, r.seed)
			if code := ts.postJSON(t, "/v1/completions", body, &got[i]); code != 200 || len(got[i].Choices) != 2 {
				t.Errorf("request %d: status %d, %+v", i, code, got[i])
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, r := range reqs {
		for c, ch := range got[i].Choices {
			tokens := encode(r.prompt)
			var want []int32
			for range r.maxTokens {
				next := referenceNext(ts.engine.model, tokens[len(tokens)-1], len(tokens)-1, r.seed*maxN+uint64(c))
				want, tokens = append(want, next), append(tokens, next)
			}
			if ch.Text != decode(want...) {
				t.Errorf("request %d choice %d: served %q, the host reference is %q", i, c, ch.Text, decode(want...))
			}
		}
	}
}
