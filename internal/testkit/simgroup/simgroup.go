// Package simgroup opens gpuarena groups over simulated machines for tests:
// the setup the node and cluster tests share. Only tests import it
// (it is apart from testkit, which gpuworker's own tests import and which
// so cannot import gpuarena).
package simgroup

import (
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// Machine is the simulated machine spec names (gpuworker.ParseMachine:
// "2xh100-80gb", "8xh200", "1"); a bad spec fails tb.
func Machine(tb testing.TB, spec string) gpuworker.MachineConfig {
	tb.Helper()
	mc, err := gpuworker.ParseMachine(spec)
	if err != nil {
		tb.Fatal(err)
	}
	return mc
}

// Open opens a group of one rank per device of mc, logging nothing, and
// closes it when the test ends (a failed close fails tb).
func Open(tb testing.TB, mc gpuworker.MachineConfig) *gpuarena.Group {
	tb.Helper()
	machine, err := gpuworker.NewHostSimMachine(mc)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(machine.Factories()...),
		gpuarena.WithRankOptions(gpuarena.WithLogger(testkit.Discard)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := g.Close(); err != nil {
			tb.Error(err)
		}
	})
	return g
}
