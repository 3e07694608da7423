package gpuarena

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuarena/gpuarena/device"
)

// Ledgers returns every rank's ledger snapshot, by rank (Manager.Ledger):
// each device's allocations and counters, on its own. Errors: *RankErrors
// joined in rank order (ErrClosed, the context's).
func (g *Group) Ledgers(ctx context.Context) ([]device.Ledger, error) {
	out := make([]device.Ledger, len(g.ranks))
	err := g.each("ledger", func(r int, m *Manager) error {
		l, err := m.Ledger(ctx)
		out[r] = l
		return err
	})
	return out, err
}

// Stats returns how every rank's GPU worker has run, by rank
// (Manager.Stats: its thread ids, messages, takeovers). Errors: as Ledgers.
func (g *Group) Stats(ctx context.Context) ([]device.Stats, error) {
	out := make([]device.Stats, len(g.ranks))
	err := g.each("stats", func(r int, m *Manager) error {
		s, err := m.Stats(ctx)
		out[r] = s
		return err
	})
	return out, err
}

// Collector returns one prometheus.Collector of every rank's metrics
// (Manager.Collector), each series with its rank's LabelDevice (the
// device ordinal) and LabelDeviceName. The ranks' devices must have
// distinct ordinals, as CUDA devices and a gpuworker.HostSimMachine's do;
// ranks of one ordinal export the same series, and Register fails with a
// prometheus error naming them.
func (g *Group) Collector() prometheus.Collector {
	cs := make(groupCollector, len(g.ranks))
	for r, m := range g.ranks {
		cs[r] = m.Collector()
	}
	return cs
}

// groupCollector collects each rank's collector in turn.
type groupCollector []prometheus.Collector

func (cs groupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs groupCollector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
