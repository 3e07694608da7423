package bench

import (
	"math/rand/v2"
	"slices"
	"time"
)

// RatioResamples is the number of bootstrap resamples behind a build row's
// confidence interval.
const RatioResamples = 4000

// ratioSeed seeds the bootstrap, so that the same durations always give the
// same interval.
const ratioSeed = 0x6770756172656e61

// RatioCI95 is the 95% confidence interval of mean(a) / mean(b), where a[i]
// and b[i] were measured in the same cycle (the build suite's actor and
// direct builds, interleaved): a paired percentile bootstrap (Efron &
// Tibshirani, An Introduction to the Bootstrap, 1993, ch. 13) that draws
// whole cycles with replacement, so that drift shared by a cycle's two
// measurements stays paired. It returns 0, 0 when the slices differ in
// length, hold fewer than 2 cycles, or b sums to zero.
func RatioCI95(a, b []time.Duration) (lo, hi float64) {
	n := len(a)
	if n < 2 || len(b) != n {
		return 0, 0
	}
	rng := rand.New(rand.NewPCG(ratioSeed, uint64(n)))
	ratios := make([]float64, 0, RatioResamples)
	for range RatioResamples {
		var sa, sb time.Duration
		for range n {
			i := rng.IntN(n)
			sa, sb = sa+a[i], sb+b[i]
		}
		if sb > 0 {
			ratios = append(ratios, float64(sa)/float64(sb))
		}
	}
	if len(ratios) == 0 {
		return 0, 0
	}
	slices.Sort(ratios)
	at := func(q float64) float64 { return ratios[min(int(q*float64(len(ratios))), len(ratios)-1)] }
	return at(0.025), at(0.975)
}
