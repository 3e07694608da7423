package kvcache

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// stepTrace generates issue 15's scheduler step: 8 sequences finish, 256
// running ones append one token each (one in 16 fills its block and takes
// a new one), and 8 arrive with 2,048-token prompts whose first 1,024
// tokens are one of 4 shared system prompts (50% prefix hits). Before a
// step 264 sequences run; the 8 oldest finish.
type stepTrace struct {
	running []SeqID // oldest first
	next    SeqID
	shared  [4][]int32
	prompts [8][]int32
	step    Step
	token   []int32
	n       int
}

const (
	traceRunning    = 256
	traceTurnover   = 8
	tracePromptLen  = 2048
	traceSharedLen  = 1024
	traceBlockSize  = 16
	traceBlocks     = 32768
	traceWarmupStep = (traceRunning + traceTurnover) / traceTurnover
)

func newStepTrace() *stepTrace {
	tr := &stepTrace{next: 1, token: []int32{7}}
	for i := range tr.shared {
		tr.shared[i] = make([]int32, traceSharedLen)
		for j := range tr.shared[i] {
			tr.shared[i][j] = int32(1000*i + j)
		}
	}
	for i := range tr.prompts {
		tr.prompts[i] = make([]int32, tracePromptLen)
		for j := traceSharedLen; j < tracePromptLen; j++ {
			tr.prompts[i][j] = int32(100000 + j)
		}
	}
	return tr
}

// nextStep builds the next step in reused slices. Until 264 sequences run
// it only admits.
func (tr *stepTrace) nextStep() Step {
	s := &tr.step
	s.Free, s.Append, s.Admit = s.Free[:0], s.Append[:0], s.Admit[:0]
	if len(tr.running) >= traceRunning+traceTurnover {
		s.Free = append(s.Free, tr.running[:traceTurnover]...)
		tr.running = tr.running[traceTurnover:]
		for _, id := range tr.running {
			s.Append = append(s.Append, Append{Seq: id, Tokens: tr.token})
		}
	}
	for i := range tr.prompts {
		p := tr.prompts[i]
		copy(p, tr.shared[(tr.n+i)%len(tr.shared)])
		p[traceSharedLen] = int32(tr.next) // the rest of the prompt is unique
		s.Admit = append(s.Admit, Admit{Seq: tr.next, Tokens: p})
		tr.running = append(tr.running, tr.next)
		tr.next++
	}
	tr.n++
	return *s
}

func newTracePool(tb testing.TB) (*Pool, *stepTrace) {
	p, err := New(Config{Groups: []GroupConfig{{Name: "full_attention", Kind: FullAttention, Blocks: traceBlocks, BlockSize: traceBlockSize}}})
	if err != nil {
		tb.Fatal(err)
	}
	tr := newStepTrace()
	for range 2 * traceWarmupStep {
		applyTraceStep(tb, p, tr)
	}
	return p, tr
}

func applyTraceStep(tb testing.TB, p *Pool, tr *stepTrace) {
	s := tr.nextStep()
	r := p.Apply(s)
	if len(r.Errors) > 0 {
		tb.Fatalf("step %d: %v", tr.n, r.Errors[0].Err)
	}
	for i, h := range r.CachedTokens {
		if h != traceSharedLen && tr.n > 1 { // step 1 brings the shared prompts
			tb.Fatalf("step %d: admission %d hit %d tokens, want %d", tr.n, i, h, traceSharedLen)
		}
	}
}

// BenchmarkStep is one scheduler step on the pool, called directly from
// one goroutine; p50-ns and p99-ns are per step.
func BenchmarkStep(b *testing.B) {
	p, tr := newTracePool(b)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		applyTraceStep(b, p, tr)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// lockedPool is the floor an actor-owned pool is measured against: the
// same pool behind one sync.Mutex.
type lockedPool struct {
	mu   sync.Mutex
	pool *Pool
	tr   *stepTrace
}

// BenchmarkStepMutex is the same steps from 16 goroutines through one
// mutex (each caller builds and applies a whole step under the lock):
// ns/op is wall time per step with 16 callers contending.
func BenchmarkStepMutex(b *testing.B) {
	p, tr := newTracePool(b)
	lp := &lockedPool{pool: p, tr: tr}
	b.ReportAllocs()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			lp.mu.Lock()
			applyTraceStep(b, lp.pool, lp.tr)
			lp.mu.Unlock()
		}
	})
}

// BenchmarkPrefixLookup is CachedPrefix of a 32,768-token prompt (2,048
// blocks of 16) whose blocks are all cached (its sequence freed): 2,047
// blocks hit, the last token always being computed.
func BenchmarkPrefixLookup(b *testing.B) {
	p, prompt := warm32k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if h := p.CachedPrefix(prompt, nil); h != len(prompt)-traceBlockSize {
			b.Fatalf("hit %d tokens", h)
		}
	}
}

// BenchmarkAdmitCached32k admits the warm 32,768-token prompt (2,047
// blocks hit and taken off the free queue, one new) and frees it again:
// one admission and one free per op.
func BenchmarkAdmitCached32k(b *testing.B) {
	p, prompt := warm32k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r := p.Apply(Step{Admit: []Admit{{Seq: 2, Tokens: prompt}}})
		if r.CachedTokens[0] != len(prompt)-traceBlockSize {
			b.Fatalf("hit %d tokens", r.CachedTokens[0])
		}
		p.Apply(Step{Free: []SeqID{2}})
	}
}

func warm32k(b *testing.B) (*Pool, []int32) {
	p, err := New(Config{Groups: []GroupConfig{{Name: "full_attention", Kind: FullAttention, Blocks: 4096, BlockSize: traceBlockSize}}})
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 32768)
	for i := range prompt {
		prompt[i] = int32(i * 7)
	}
	if r := p.Apply(Step{Admit: []Admit{{Seq: 1, Tokens: prompt}}}); len(r.Errors) > 0 {
		b.Fatal(r.Errors[0].Err)
	}
	p.Apply(Step{Free: []SeqID{1}})
	return p, prompt
}
