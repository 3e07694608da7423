package bench

// dispatch measures one client's round trips, empty and mem-info, for every
// subject.
func (r *runner) dispatch() error {
	for _, s := range Subjects(r.cfg.Kinds, r.cfg.Spins) {
		if err := r.dispatchOne(s); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) dispatchOne(s Subject) error {
	return r.eachOp(s, func(op Op, call func(Op) error) error {
		settle()
		sum, err := r.drive(1, r.cfg.Budget, func() error { return call(op) })
		if err != nil {
			return err
		}
		r.add(Row{Suite: SuiteDispatch, Case: string(op), Subject: s.Name(), Clients: 1, Summary: sum})
		return nil
	})
}
