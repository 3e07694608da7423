package bench

import "slices"

// contention measures the round trips from each count of concurrent clients,
// for every subject that takes them; each row's Ratio is its throughput over
// the same subject's at one client.
func (r *runner) contention() error {
	var kinds []Kind
	for _, k := range r.cfg.Kinds {
		if k != KindDirect {
			kinds = append(kinds, k)
		}
	}
	clients := slices.Sorted(slices.Values(r.cfg.Clients))
	for _, s := range Subjects(kinds, r.cfg.Spins) {
		if err := r.contentionOne(s, slices.Compact(clients)); err != nil {
			return err
		}
	}
	return nil
}

// contentionBudget is b for clients clients: at least MinOpsPerClient
// operations each when b counts operations.
func contentionBudget(b Budget, clients int) Budget {
	if b.Duration == 0 {
		b.Ops = max(b.Ops, MinOpsPerClient*clients)
	}
	return b
}

func (r *runner) contentionOne(s Subject, clients []int) error {
	return r.eachOp(s, func(op Op, call func(Op) error) error {
		var single float64
		for _, c := range clients {
			settle()
			sum, err := r.drive(c, contentionBudget(r.cfg.Budget, c), func() error { return call(op) })
			if err != nil {
				return err
			}
			row := Row{Suite: SuiteContention, Case: string(op), Subject: s.Name(), Clients: c, Summary: sum}
			if c == 1 {
				single = sum.OpsPerSec
			} else if single > 0 {
				row.Ratio, row.RatioOf = sum.OpsPerSec/single, "ops/s at 1 client"
			}
			r.add(row)
		}
		return nil
	})
}
