package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/arena"
)

// maxCarveClients bounds the carve suite's client counts: carves are small
// and bump-only, so many clients only exhaust the slab sooner.
const maxCarveClients = 16

// carve measures Manager.CarveSlab on CarveModel's row-wise slab, for each
// size and each client count up to maxCarveClients, each row on a fresh
// Manager (carving is bump-only), beside the carve's arithmetic alone
// (arena.CarveSlab) as the direct floor. The operations are capped at what
// the slab holds.
func (r *runner) carve() error {
	plan := r.plans[planKey{r.cfg.CarveModel, carveOptions}]
	var slab *arena.SlabSpec
	for i := range plan.Slabs {
		if plan.Slabs[i].Name == arena.SlabSSMRowwiseW {
			slab = &plan.Slabs[i]
		}
	}
	if slab == nil {
		return fmt.Errorf("%s with fp8_rowwise has no %s slab", r.cfg.CarveModel, arena.SlabSSMRowwiseW)
	}
	for _, size := range r.cfg.CarveSizes {
		fits := int(slab.Bytes / alignUp(size, actorsSlabAlign))
		if fits < 2 {
			return fmt.Errorf("carve %d B: the %d B slab holds %d", size, slab.Bytes, fits)
		}
		name := fmt.Sprintf("%s %d B", slab.Name, size)
		direct, err := r.carveDirect(slab.Bytes, size, r.carveWarmup(fits), r.carveBudget(fits, 1))
		if err != nil {
			return err
		}
		r.add(Row{Suite: SuiteCarve, Case: name, Subject: SubjectDirect, Clients: 1, Summary: direct})
		for _, c := range r.cfg.Clients {
			if c > maxCarveClients {
				continue
			}
			sum, err := r.carveActor(plan, size, c, fits)
			if err != nil {
				return err
			}
			r.add(Row{Suite: SuiteCarve, Case: name, Subject: SubjectActor, Clients: c, Summary: sum})
		}
	}
	return nil
}

// actorsSlabAlign is the slab supervisor's default carve alignment
// (actors.DefaultSlabAlign).
const actorsSlabAlign = 256

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// carveBudget is the configured budget capped at fits carves, less the
// warm-up's and the rounding up of Drive's share per client.
func (r *runner) carveBudget(fits, clients int) Budget {
	b := r.cfg.Budget
	limit := max(fits-r.carveWarmup(fits)-clients, 1)
	if b.Ops == 0 || b.Ops > limit {
		b.Ops = limit
	}
	return b
}

// carveWarmup is the number of unrecorded carves before a row: warmOps,
// and at most a tenth of the fits carves the slab holds.
func (r *runner) carveWarmup(fits int) int { return max(min(warmOps(r.cfg.Budget), fits/10), 1) }

// carveDirect is the floor: arena.CarveSlab's arithmetic on a counter,
// warmed up by warmup carves.
func (r *runner) carveDirect(capacity, size int64, warmup int, b Budget) (Summary, error) {
	var used int64
	carve := func() error {
		var err error
		_, used, err = arena.CarveSlab(capacity, used, size, actorsSlabAlign)
		return err
	}
	if _, err := r.drive(1, Budget{Ops: warmup}, carve); err != nil {
		return Summary{}, err
	}
	return r.drive(1, b, carve)
}

// carveActor carves size bytes from clients goroutines through a fresh
// Manager that has built plan.
func (r *runner) carveActor(plan *arena.Plan, size int64, clients, fits int) (Summary, error) {
	m, err := gpuarena.New(gpuarena.WithBackendFactory(r.cfg.Backend.Factory()),
		gpuarena.WithDispatcherSpin(r.cfg.ManagerSpin), gpuarena.WithLogger(quiet))
	if err != nil {
		return Summary{}, err
	}
	ctx := context.Background()
	carve := func() error {
		_, _, err := m.CarveSlab(ctx, arena.SlabSSMRowwiseW, size)
		return err
	}
	var sum Summary
	if _, err = m.BuildArena(ctx, plan); err == nil {
		if _, err = r.drive(1, Budget{Ops: r.carveWarmup(fits)}, carve); err == nil {
			settle()
			sum, err = r.drive(clients, r.carveBudget(fits, clients), carve)
		}
	}
	return sum, errors.Join(err, m.Close())
}
