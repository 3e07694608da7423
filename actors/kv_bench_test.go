package actors_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpuarena/gpuarena/actors"
	"github.com/gpuarena/gpuarena/internal/testkit"
	"github.com/gpuarena/gpuarena/kvcache"
)

// decodeTrace makes the scheduler steps of BenchmarkKVStep: running
// sequences append one token each (a new block every 16 tokens), the
// oldest finish and as many new ones are admitted with prompts of
// promptTokens, every other one starting with a prefix of prefixTokens
// shared with earlier prompts (a prefix-cache hit). ids are from base on,
// so several traces can share one pool.
type decodeTrace struct {
	base, next    kvcache.SeqID
	running       []kvcache.SeqID
	lens          map[kvcache.SeqID]int
	turn          int
	finish        int
	promptTokens  int
	prefixTokens  int
	shared        []int32
	tokenCounters int32
}

func newDecodeTrace(base kvcache.SeqID, running, finish, promptTokens int) *decodeTrace {
	d := &decodeTrace{base: base, next: base, lens: map[kvcache.SeqID]int{}, finish: finish, promptTokens: promptTokens, prefixTokens: promptTokens / 2}
	d.shared = make([]int32, d.prefixTokens)
	for i := range d.shared {
		d.shared[i] = int32(i)
	}
	return d
}

// warm admits the running sequences, one step of admissions at a time.
func (d *decodeTrace) warm(apply func(kvcache.Step) kvcache.StepResult, running int) {
	for len(d.running) < running {
		n := min(8, running-len(d.running))
		d.check(apply(kvcache.Step{Admit: d.admissions(n)}))
	}
}

func (d *decodeTrace) admissions(n int) []kvcache.Admit {
	out := make([]kvcache.Admit, n)
	for i := range out {
		d.next++
		toks := make([]int32, d.promptTokens)
		start := 0
		if d.turn++; d.turn%2 == 0 {
			start = copy(toks, d.shared)
		}
		for j := start; j < len(toks); j++ {
			d.tokenCounters++
			toks[j] = 1_000_000 + d.tokenCounters
		}
		out[i] = kvcache.Admit{Seq: d.next, Tokens: toks}
		d.running = append(d.running, d.next)
		d.lens[d.next] = len(toks)
	}
	return out
}

// step is the next scheduler step.
func (d *decodeTrace) step() kvcache.Step {
	var s kvcache.Step
	s.Free = slices.Clone(d.running[:d.finish])
	d.running = d.running[d.finish:]
	for _, id := range s.Free {
		delete(d.lens, id)
	}
	s.Append = make([]kvcache.Append, len(d.running))
	for i, id := range d.running {
		d.tokenCounters++
		s.Append[i] = kvcache.Append{Seq: id, Tokens: []int32{d.tokenCounters}}
	}
	s.Admit = d.admissions(d.finish)
	return s
}

func (d *decodeTrace) check(r kvcache.StepResult) {
	if len(r.Errors) > 0 {
		panic(r.Errors[0].Err)
	}
}

func newBenchPool(b *testing.B, blocks int) *kvcache.Pool {
	p, err := kvcache.New(kvcache.Config{Groups: []kvcache.GroupConfig{{Name: "full_attention", Kind: kvcache.FullAttention, Blocks: blocks, BlockSize: 16}}})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkKVStep is one scheduler step — 256 running decode sequences
// append a token each (~16 new blocks), 8 finish, 8 new 2,048-token
// prompts are admitted, half of them hitting a 1,024-token cached prefix —
// through the KV supervisor's mailbox (actor) and on the same pool called
// directly under one mutex (mutex, the floor), with the p50 and p99 of a
// step. The parallel variants run 16 callers at once, each with 16
// sequences of its own in one shared pool, for throughput.
//
//	go test ./actors -run '^$' -bench KVStep -benchtime 2000x
func BenchmarkKVStep(b *testing.B) {
	const blocks = 80_000
	b.Run("mutex", func(b *testing.B) {
		p := newBenchPool(b, blocks)
		var mu sync.Mutex
		apply := func(s kvcache.Step) kvcache.StepResult { mu.Lock(); defer mu.Unlock(); return p.Apply(s) }
		runSteps(b, apply)
	})
	b.Run("actor", func(b *testing.B) {
		kv := actors.SpawnKV(testkit.NewActorSystem(b), testkit.Discard)
		defer kv.Stop()
		if err := kv.Reserve(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := kv.Install(nil, newBenchPool(b, blocks)); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		apply := func(s kvcache.Step) kvcache.StepResult {
			r, err := kv.Step(ctx, s)
			if err != nil {
				b.Fatal(err)
			}
			return r
		}
		runSteps(b, apply)
	})
	b.Run("mutex-parallel-16", func(b *testing.B) {
		p := newBenchPool(b, blocks)
		var mu sync.Mutex
		runParallel(b, func(s kvcache.Step) kvcache.StepResult { mu.Lock(); defer mu.Unlock(); return p.Apply(s) })
	})
	b.Run("actor-parallel-16", func(b *testing.B) {
		kv := actors.SpawnKV(testkit.NewActorSystem(b), testkit.Discard)
		defer kv.Stop()
		if err := kv.Reserve(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := kv.Install(nil, newBenchPool(b, blocks)); err != nil {
			b.Fatal(err)
		}
		runParallel(b, func(s kvcache.Step) kvcache.StepResult {
			r, err := kv.Step(context.Background(), s)
			if err != nil {
				panic(err)
			}
			return r
		})
	})
}

func runSteps(b *testing.B, apply func(kvcache.Step) kvcache.StepResult) {
	d := newDecodeTrace(0, 256, 8, 2048)
	d.warm(apply, 256)
	steps := make([]kvcache.Step, 0, b.N)
	for range b.N {
		steps = append(steps, d.step())
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for _, s := range steps {
		t0 := time.Now()
		d.check(apply(s))
		took = append(took, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}

func runParallel(b *testing.B, apply func(kvcache.Step) kvcache.StepResult) {
	var mu sync.Mutex
	var base kvcache.SeqID
	b.SetParallelism(max(1, 16/testingProcs()))
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		base += 1 << 32
		d := newDecodeTrace(base, 16, 1, 2048)
		mu.Unlock()
		d.warm(apply, 16)
		for pb.Next() {
			d.check(apply(d.step()))
		}
	})
}

// testingProcs is GOMAXPROCS, for SetParallelism: 16 callers in all.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
