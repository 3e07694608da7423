package serving

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuarena/gpuarena/kvcache"
)

// poolKV drives a kvcache.Pool directly and checks its invariants after
// every step.
type poolKV struct {
	t    *testing.T
	pool *kvcache.Pool
}

func (p poolKV) KVStep(_ context.Context, s kvcache.Step) (kvcache.StepResult, error) {
	r := p.pool.Apply(s)
	if err := p.pool.Check(); err != nil {
		p.t.Fatalf("pool invariants after a step: %v", err)
	}
	for i, c := range r.Counts {
		if c.Free+c.Cached+c.Used != c.Total {
			p.t.Fatalf("group %d: free %d + cached %d + used %d ≠ total %d", i, c.Free, c.Cached, c.Used, c.Total)
		}
	}
	return r, nil
}

func newPoolKV(t *testing.T, blocks int) poolKV {
	t.Helper()
	p, err := kvcache.New(kvcache.Config{Groups: []kvcache.GroupConfig{{Name: "full_attention", Kind: kvcache.FullAttention, Blocks: blocks, BlockSize: 16}}})
	if err != nil {
		t.Fatal(err)
	}
	return poolKV{t, p}
}

func serve(t *testing.T, tr *Trace, kv poolKV, opts Options) Stats {
	t.Helper()
	s, err := NewScheduler(tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for steps := 0; !s.Done(); steps++ {
		if steps > 100000 {
			t.Fatalf("not done after %d steps: %+v", steps, s.Stats())
		}
		r, err := s.Step(ctx, kv)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Batch) > opts.MaxBatchSize {
			t.Fatalf("step %d: a batch of %d > max_batch_size %d", r.Step, len(r.Batch), opts.MaxBatchSize)
		}
	}
	if kv.pool.Len() != 0 {
		t.Fatalf("%d sequences left in the pool after the trace", kv.pool.Len())
	}
	return s.Stats()
}

func genTrace(t *testing.T, n int) *Trace {
	t.Helper()
	tr, err := Generate(GenerateOptions{Seed: 3, Requests: n, ArrivalsPerStep: 2, MinPrompt: 64, MaxPrompt: 512,
		MinOutput: 8, MaxOutput: 64, Prefixes: 4, PrefixShare: 0.5, PrefixTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A roomy pool serves the whole trace without preempting, and half the
// requests sharing four prefixes hit the prefix cache; every request
// finishes and the pool is empty at the end.
func TestSchedulerRoomy(t *testing.T) {
	tr := genTrace(t, 100)
	st := serve(t, tr, newPoolKV(t, 20000), Options{MaxBatchSize: 64, MaxBatchTokens: 4096, MaxSeqLen: 4096, Vocab: 32000})
	if st.Finished != 100 || st.Preemptions != 0 || st.Admitted != 100 {
		t.Fatalf("roomy pool: %+v; want 100 admitted and finished, no preemption", st)
	}
	if st.CachedTokens == 0 || st.CachedTokens%16 != 0 {
		t.Fatalf("cached tokens %d: want prefix hits, in whole blocks", st.CachedTokens)
	}
	if st.RoundTrips != st.Steps {
		t.Fatalf("%d round trips for %d steps without preemption: want one each", st.RoundTrips, st.Steps)
	}
}

// A pool too small for the load preempts, and still finishes every
// request with the pool's invariants true after every round.
func TestSchedulerPreempts(t *testing.T) {
	tr := genTrace(t, 60)
	st := serve(t, tr, newPoolKV(t, 120), Options{MaxBatchSize: 32, MaxBatchTokens: 2048, MaxSeqLen: 2048, Vocab: 32000})
	if st.Finished != 60 || st.Preemptions == 0 || st.Admitted != 60+st.Preemptions {
		t.Fatalf("tight pool: %+v; want 60 finished, preemptions, and one admission more per preemption", st)
	}
	if st.PeakUsedBlocks[0] > 119 {
		t.Fatalf("peak %d blocks used of 119", st.PeakUsedBlocks[0])
	}
}

// Traces the limits cannot serve are refused up front.
func TestTraceValidate(t *testing.T) {
	for name, r := range map[string]Request{
		"long":      {ID: "a", PromptTokens: 900, OutputTokens: 200},
		"no output": {ID: "a", PromptTokens: 9},
		"prefix":    {ID: "a", PromptTokens: 9, OutputTokens: 1, PrefixTokens: 10, Prefix: "p"},
		"unnamed":   {ID: "a", PromptTokens: 9, OutputTokens: 1, PrefixTokens: 4},
	} {
		_, err := NewScheduler(&Trace{Requests: []Request{r}}, Options{MaxBatchSize: 8, MaxBatchTokens: 1024, MaxSeqLen: 1024, Vocab: 100})
		if !errors.Is(err, ErrInvalidTrace) {
			t.Errorf("%s: %v, want ErrInvalidTrace", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(path, []byte(`{"requests":[{"id":"a","prompt_tokens":4,"output_tokens":2,"colour":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrInvalidTrace) {
		t.Fatalf("unknown field: %v, want ErrInvalidTrace", err)
	}
}

// The same options make the same trace.
func TestGenerateDeterministic(t *testing.T) {
	a, b := genTrace(t, 50), genTrace(t, 50)
	for i := range a.Requests {
		if a.Requests[i] != b.Requests[i] {
			t.Fatalf("request %d differs: %+v vs %+v", i, a.Requests[i], b.Requests[i])
		}
	}
}

// A prompt larger than the whole pool is an error, not a loop.
func TestSchedulerUnservable(t *testing.T) {
	tr := &Trace{Requests: []Request{{ID: "big", PromptTokens: 200, OutputTokens: 2}}}
	s, err := NewScheduler(tr, Options{MaxBatchSize: 4, MaxBatchTokens: 1024, MaxSeqLen: 1024, Vocab: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step(context.Background(), newPoolKV(t, 8)); !errors.Is(err, ErrUnservable) || !errors.Is(err, kvcache.ErrExhausted) {
		t.Fatalf("a 13-block prompt on 7 blocks: %v, want ErrUnservable wrapping the exhaustion", err)
	}
}

// An idle scheduler waits for the next request instead of running empty
// steps: requests a billion steps apart take the steps their tokens need,
// and each step reports the step it ran at.
func TestSchedulerSkipsIdleSteps(t *testing.T) {
	tr := &Trace{Requests: []Request{
		{ID: "a", ArrivalStep: 3, PromptTokens: 10, OutputTokens: 2},
		{ID: "b", ArrivalStep: 1_000_000_000, PromptTokens: 10, OutputTokens: 2},
	}}
	s, err := NewScheduler(tr, Options{MaxBatchSize: 4, MaxBatchTokens: 1024, MaxSeqLen: 1024, Vocab: 100})
	if err != nil {
		t.Fatal(err)
	}
	kv := newPoolKV(t, 8)
	var steps []int
	for !s.Done() {
		if len(steps) > 10 {
			t.Fatalf("not done after steps %v", steps)
		}
		r, err := s.Step(context.Background(), kv)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, r.Step)
	}
	// Each request: a prefill step that samples its first token, a decode
	// step for its second; the step after frees it.
	want := []int{3, 4, 5, 1_000_000_000, 1_000_000_001, 1_000_000_002}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
}
