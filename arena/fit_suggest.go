package arena

import "math/big"

// suggest searches, for a plan that does not fit, the largest
// max_batch_tokens and max_seq_len below the plan's that fit (each alone;
// the plan's bytes and one sequence's KV grow monotonically with both, so
// a binary search finds them; max_seq_len never past the model's
// MaxSeqLenLimit), the utilization nearest the plan's that fits (the
// lowest when the budget is short, the highest when only the memory
// outside it is; checked by fitting at it), and whether logits_rows
// "sampled" alone fits.
func (f *fitter) suggest(plan *Plan, r *FitReport) *FitSuggestions {
	base := plan.Options
	fits := func(o Options) bool {
		p, err := PlanFor(f.cfg, o)
		if err != nil {
			return false
		}
		fr, err := f.fit(p)
		return err == nil && fr.Fits
	}
	seqHi := base.MaxSeqLen - 1
	if limit, _ := f.cfg.MaxSeqLenLimit(); limit > 0 {
		seqHi = min(seqHi, limit)
	}
	s := &FitSuggestions{
		MaxBatchTokens: largestFitting(1, base.MaxBatchTokens-1, func(m int64) bool {
			o := base
			o.MaxBatchTokens, o.MaxBatchSize = m, min(base.MaxBatchSize, m)
			return fits(o)
		}),
		MaxSeqLen: largestFitting(1, seqHi, func(l int64) bool {
			o := base
			o.MaxSeqLen = l
			return fits(o)
		}),
	}
	switch {
	case r.RequiredBytes <= r.BudgetBytes && f.noBudget == nil:
		s.GPUMemoryUtilization = highestOutsideUtilization(r)
	case f.opts.scope == UtilizationInstance:
		s.GPUMemoryUtilization = lowestInstanceUtilization(r.RequiredBytes, f.dev.FreeBytes, f.dev.TotalBytes)
	default:
		s.GPUMemoryUtilization = lowestUtilization(r.RequiredBytes, f.dev.TotalBytes)
	}
	if u := s.GPUMemoryUtilization; u > 0 && !f.fitsAtUtilization(plan, u) {
		s.GPUMemoryUtilization = 0
	}
	if base.LogitsRows != LogitsSampled {
		o := base
		o.LogitsRows = LogitsSampled
		if fits(o) {
			s.LogitsRows = LogitsSampled
		}
	}
	return s
}

// fitsAtUtilization reports whether plan fits with gpu_memory_utilization
// u in place of the fitter's.
func (f *fitter) fitsAtUtilization(plan *Plan, u float64) bool {
	o := f.opts
	o.utilization = u
	g, err := newFitter(f.cfg, f.dev, o, f.weights)
	if err != nil {
		return false
	}
	r, err := g.fit(plan)
	return err == nil && r.Fits
}

// highestOutsideUtilization is, for r whose budget holds everything but
// whose memory outside the budget does not hold OutsideRequiredBytes, the
// highest n/10000 whose budget leaves that much outside: free − ⌈u·total⌉
// under UtilizationInstance, total − ⌊u·total⌋ under UtilizationDevice, so
// n = ⌊(free or total − OutsideRequiredBytes)·10000 / total⌋; 0 when n ≤
// 0.
func highestOutsideUtilization(r *FitReport) float64 {
	room := r.Device.TotalBytes
	if r.UtilizationScope == UtilizationInstance {
		room = r.Device.FreeBytes
	}
	n := new(big.Int).Mul(big.NewInt(room-r.OutsideRequiredBytes), big.NewInt(fitUtilizationStep))
	n.Quo(n, big.NewInt(r.Device.TotalBytes))
	if n.Sign() <= 0 {
		return 0
	}
	return float64(min(n.Int64(), fitUtilizationStep)) / fitUtilizationStep
}

// largestFitting is the largest v in [lo, hi] with ok(v), for ok true up to
// some value and false above it; 0 when ok(lo) is false or hi < lo.
func largestFitting(lo, hi int64, ok func(int64) bool) int64 {
	if hi < lo || !ok(lo) {
		return 0
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// lowestUtilization is the lowest n/10000 ≤ 1 with utilizationCap(n/10000,
// total) ≥ required: n = ⌈required·10000 / total⌉; 0 when n > 10000.
func lowestUtilization(required, total int64) float64 {
	n := new(big.Int).Mul(big.NewInt(required), big.NewInt(fitUtilizationStep))
	d := big.NewInt(total)
	q, m := new(big.Int).QuoRem(n, d, new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if q.Cmp(big.NewInt(fitUtilizationStep)) > 0 || q.Sign() <= 0 {
		return 0
	}
	return float64(q.Int64()) / fitUtilizationStep
}
