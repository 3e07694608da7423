package gpuarena_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuarena/gpuarena"
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
		if _, err := m.Forward(ctx, func(*gpuarena.Arena, gpuarena.Device) error { return nil }); err != nil {
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
	if len(inUse) != 1 || inUse[0].GetLabel()[0].GetValue() != "arena" || int64(inUse[0].GetGauge().GetValue()) != a.PoolBytes {
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
