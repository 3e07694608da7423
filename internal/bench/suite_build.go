package bench

import (
	"fmt"
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/device"
)

// Subjects of the build and carve suites.
const (
	SubjectActor  = "actor"
	SubjectDirect = "direct"
)

// Layouts are the arena layouts the build suite measures.
var Layouts = []device.Layout{device.LayoutPooled, device.LayoutDiscrete}

// build measures, for each model, max_batch_tokens and layout, BuildOps
// cycles of build and release through the actors and as direct driver calls
// on a new locked thread (DirectBuild), interleaved (actor, direct, actor,
// …) so that drift hits both alike. Each actor row's Ratio is its mean over
// the direct row's, with its 95% confidence interval (RatioCI95).
func (r *runner) build() error {
	for _, model := range r.cfg.Models {
		for _, m := range r.cfg.BatchTokens {
			plan := r.plans[planKey{model, arena.Options{MaxBatchTokens: m}}]
			for _, layout := range Layouts {
				if err := r.buildOne(fmt.Sprintf("%s M=%d %s", model, m, layout), plan, layout); err != nil {
					return fmt.Errorf("%s M=%d %s: %w", model, m, layout, err)
				}
			}
		}
	}
	return nil
}

func (r *runner) buildOne(name string, plan *arena.Plan, layout device.Layout) error {
	a := ActorBuild{Factory: r.cfg.Backend.Factory(), Plan: plan, Layout: layout, Spin: r.cfg.ManagerSpin}
	d, err := NewDirectBuild(plan, layout)
	if err != nil {
		return err
	}
	n := r.cfg.BuildOps
	as, ds := newBuildSample(n+1), newBuildSample(n+1)
	clock := CycleClock{BuildIdle: r.cfg.BuildIdle, SetupIdle: r.cfg.SetupIdle}
	settle()
	for i := range n + 1 { // the first cycle of each warms up
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if err := a.Cycle(&clock, &as); err != nil {
			return err
		}
		if err := d.Cycle(r.cfg.Backend.Factory(), &clock, &ds); err != nil {
			return err
		}
		if i == 0 {
			as, ds = newBuildSample(n), newBuildSample(n)
		}
	}
	bLow, bHigh := RatioCI95(as.Build, ds.Build)
	rLow, rHigh := RatioCI95(as.Release, ds.Release)
	ab, ar := as.Summaries()
	db, dr := ds.Summaries()
	abd, ard := as.DriverMeans()
	dbd, drd := ds.DriverMeans()
	for _, p := range []struct {
		phase                   string
		actor, driver           Summary
		actorInDriver, inDriver time.Duration
		low, high               float64
	}{{"build", ab, db, abd, dbd, bLow, bHigh}, {"release", ar, dr, ard, drd, rLow, rHigh}} {
		c := name + " " + p.phase
		r.add(Row{Suite: SuiteBuild, Case: c, Subject: SubjectDirect, Clients: 1, Summary: p.driver, DriverMean: p.inDriver})
		row := Row{Suite: SuiteBuild, Case: c, Subject: SubjectActor, Clients: 1, Summary: p.actor, DriverMean: p.actorInDriver}
		if p.driver.Mean > 0 {
			row.Ratio, row.RatioOf = float64(p.actor.Mean)/float64(p.driver.Mean), "direct mean"
			row.RatioLow, row.RatioHigh = p.low, p.high
		}
		r.add(row)
	}
	return nil
}
