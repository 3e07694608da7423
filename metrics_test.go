package gpuarena_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/device"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

func TestCollectorExportsTheLedger(t *testing.T) {
	m, err := gpuarena.New(quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	plan := llamaPlan(t)
	a, err := m.BuildArena(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	inUse := got[gpuarena.MetricBytesInUse].GetMetric()
	// The default layout is one pool holding every buffer.
	if len(inUse) != 1 || labelsOf(inUse[0])["owner"] != "arena" || int64(inUse[0].GetGauge().GetValue()) != a.PoolBytes {
		t.Fatalf("%s = %v, want arena=%d", gpuarena.MetricBytesInUse, inUse, a.PoolBytes)
	}
	if n := got[gpuarena.MetricAllocations].GetMetric()[0].GetCounter().GetValue(); n != 1 {
		t.Fatalf("%s = %v, want 1", gpuarena.MetricAllocations, n)
	}
	if n := got[gpuarena.MetricForwardStep].GetMetric()[0].GetHistogram().GetSampleCount(); n != 3 {
		t.Fatalf("%s count = %d, want 3", gpuarena.MetricForwardStep, n)
	}
	if _, ok := got[gpuarena.MetricMailboxDepth]; !ok {
		t.Fatalf("%s missing", gpuarena.MetricMailboxDepth)
	}
}

// labelsOf is a series' labels by name.
func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// seriesOf is every gathered series as "family{label=value,...}" (labels
// sorted by name, as Gather sorts them) → its value: a gauge's or counter's
// value, a histogram's sample count.
func seriesOf(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName() + "{"
			for i, p := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += p.GetName() + "=" + p.GetValue()
			}
			key += "}"
			switch {
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			default:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// ordinalSim is a simulated device that reports another ordinal, as a
// host's second GPU would.
type ordinalSim struct {
	*gpuworker.HostSim
	ordinal int
}

func (s ordinalSim) Info() gpuworker.DeviceInfo {
	i := s.HostSim.Info()
	i.Ordinal = s.ordinal
	return i
}

// metricsManager is a manager on a 64 MiB simulated device of that ordinal
// and name, with testkit.SmallPlan("w") built in layout and forwards forward
// steps run; it is closed when the test ends.
func metricsManager(t *testing.T, ordinal int, name string, layout device.Layout, forwards int) *gpuarena.Manager {
	t.Helper()
	sim, err := gpuworker.NewHostSim(gpuworker.HostSimConfig{TotalBytes: 64 * testkit.MiB, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	m, err := gpuarena.New(quiet, gpuarena.WithArenaLayout(layout),
		gpuarena.WithBackendFactory(func() (gpuworker.Backend, error) { return ordinalSim{sim, ordinal}, nil }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	if _, err := m.BuildArena(ctx, testkit.SmallPlan("w")); err != nil {
		t.Fatal(err)
	}
	for range forwards {
		if _, err := m.Forward(ctx, func(*device.Arena, device.Device) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// wantSeries is what one manager holding testkit.SmallPlan("w") exports
// under labels (its constant labels, sorted by name, ending in a comma):
// allocations is 2 for the pooled layout (the pool, the slab), 4 for the
// discrete one (three buffers, the slab).
func wantSeries(into map[string]float64, labels string, allocations, forwards float64) {
	const mib = testkit.MiB
	for owner, bytes := range map[string]float64{"arena": 6 * mib, "slab/w": 4 * mib} {
		into[gpuarena.MetricBytesInUse+"{"+labels+"owner="+owner+"}"] = bytes
		into[gpuarena.MetricBytesPeak+"{"+labels+"owner="+owner+"}"] = bytes
	}
	labels = strings.TrimSuffix(labels, ",")
	into[gpuarena.MetricAllocations+"{"+labels+"}"] = allocations
	into[gpuarena.MetricFrees+"{"+labels+"}"] = 0
	into[gpuarena.MetricAllocationFailures+"{"+labels+"}"] = 0
	into[gpuarena.MetricForwardStep+"{"+labels+"}"] = forwards
	into[gpuarena.MetricMailboxDepth+"{"+labels+"}"] = 0
}

// Two managers of two devices register on one registry: every family has one
// series per device (per device and owner for the byte gauges), told apart by
// the device and device_name labels, each with that manager's numbers.
func TestCollectorLabelsEachDevice(t *testing.T) {
	a := metricsManager(t, 0, "hostsim", device.LayoutPooled, 1)
	b := metricsManager(t, 1, "NVIDIA H200", device.LayoutDiscrete, 2)
	reg := prometheus.NewRegistry()
	for _, m := range []*gpuarena.Manager{a, b} {
		if err := reg.Register(m.Collector()); err != nil {
			t.Fatalf("register the collector of device %d: %v", m.Device().Ordinal, err)
		}
	}
	want := map[string]float64{}
	wantSeries(want, "device=0,device_name=hostsim,", 2, 1)
	wantSeries(want, "device=1,device_name=NVIDIA H200,", 4, 2)
	if got := seriesOf(t, reg); !maps.Equal(got, want) {
		t.Fatalf("gathered\n%v\nwant\n%v", got, want)
	}
}

// Two managers of the same device ordinal and name export the same series:
// the second registration on one registry is refused, and a label of the
// embedder's (prometheus.WrapRegistererWith) tells them apart.
func TestCollectorSameDeviceNeedsAnInstanceLabel(t *testing.T) {
	a := metricsManager(t, 0, "hostsim", device.LayoutPooled, 1)
	b := metricsManager(t, 0, "hostsim", device.LayoutDiscrete, 2)

	reg := prometheus.NewRegistry()
	if err := reg.Register(a.Collector()); err != nil {
		t.Fatal(err)
	}
	var dup prometheus.AlreadyRegisteredError
	if err := reg.Register(b.Collector()); !errors.As(err, &dup) {
		t.Fatalf("second manager of device 0 on one registry: %v, want a prometheus.AlreadyRegisteredError", err)
	}

	reg = prometheus.NewRegistry()
	for instance, m := range map[string]*gpuarena.Manager{"a": a, "b": b} {
		if err := prometheus.WrapRegistererWith(prometheus.Labels{"instance": instance}, reg).Register(m.Collector()); err != nil {
			t.Fatalf("register instance %s: %v", instance, err)
		}
	}
	want := map[string]float64{}
	wantSeries(want, "device=0,device_name=hostsim,instance=a,", 2, 1)
	wantSeries(want, "device=0,device_name=hostsim,instance=b,", 4, 2)
	if got := seriesOf(t, reg); !maps.Equal(got, want) {
		t.Fatalf("gathered\n%v\nwant\n%v", got, want)
	}
}

// A scrape while a forward step runs does not wait for the GPU thread: the
// ledger series are there, with the arena's bytes.
func TestCollectorDoesNotWaitForARunningStep(t *testing.T) {
	m, err := gpuarena.New(quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	a, err := m.BuildArena(ctx, llamaPlan(t))
	if err != nil {
		t.Fatal(err)
	}
	hang, running, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := m.Forward(ctx, func(*device.Arena, device.Device) error { close(running); <-hang; return nil })
		done <- err
	}()
	<-running
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collector())
	series := seriesOf(t, reg)
	close(hang)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var inUse float64
	for k, v := range series {
		if strings.HasPrefix(k, gpuarena.MetricBytesInUse+"{") && strings.Contains(k, "owner=arena") {
			inUse = v
		}
	}
	if int64(inUse) != a.PoolBytes {
		t.Fatalf("%s for owner arena during a step = %v, want %d (series: %v)", gpuarena.MetricBytesInUse, inUse, a.PoolBytes, series)
	}
}
