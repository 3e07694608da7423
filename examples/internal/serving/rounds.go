package serving

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena/kvcache"
)

// The KV round trips Live makes (Scheduler's go through it), and the
// counts it keeps of them.

// apply sends one kvcache.Step of step st.Steps and counts the round trip.
func (st *Stats) apply(ctx context.Context, kv KV, s kvcache.Step) (kvcache.StepResult, error) {
	st.RoundTrips++
	res, err := kv.KVStep(ctx, s)
	if err != nil {
		return res, fmt.Errorf("step %d: %w", st.Steps, err)
	}
	return res, nil
}

// note keeps the peak of each group's used blocks.
func (st *Stats) note(counts []kvcache.GroupCounts) {
	if len(st.PeakUsedBlocks) < len(counts) {
		st.PeakUsedBlocks = append(st.PeakUsedBlocks, make([]int, len(counts)-len(st.PeakUsedBlocks))...)
	}
	for i, c := range counts {
		st.PeakUsedBlocks[i] = max(st.PeakUsedBlocks[i], c.Used)
	}
}

// preempt resolves the appends the pool refused for exhaustion (refused,
// by sequence): while some are refused, victim takes the newest running
// sequence out of the batch, back to the head of the queue to be computed
// again from its prompt and what it generated (the refused append is part
// of that), and returns its id; that sequence is freed and the refused
// appends are sent again — the refused one itself when it is the newest.
// Each round asks for tables() when tables is not nil (the batch's block
// tables as that round leaves them, the victims left out). It returns the
// last round's result. Errors: kv's, or a refusal other than an append's
// exhaustion (a scheduler bug).
func (st *Stats) preempt(ctx context.Context, kv KV, appends []kvcache.Append, refused map[kvcache.SeqID]bool, res kvcache.StepResult, victim func() kvcache.SeqID, tables func() *kvcache.TableRequest) (kvcache.StepResult, error) {
	for len(refused) > 0 {
		id := victim()
		delete(refused, id)
		st.Preemptions++
		retry := kvcache.Step{Free: []kvcache.SeqID{id}}
		for _, a := range appends {
			if refused[a.Seq] {
				retry.Append = append(retry.Append, a)
			}
		}
		if tables != nil {
			retry.Tables = tables()
		}
		var err error
		if res, err = st.apply(ctx, kv, retry); err != nil {
			return res, err
		}
		clear(refused)
		for _, e := range res.Errors {
			if !errors.Is(e.Err, kvcache.ErrExhausted) || e.Op != kvcache.OpAppend {
				return res, fmt.Errorf("step %d: preemption round: %s %d refused: %w", st.Steps, e.Op, e.Index, e.Err)
			}
			refused[retry.Append[e.Index].Seq] = true
		}
	}
	return res, nil
}
