package gpuarena

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names exported by the Collector.
const (
	MetricBytesInUse         = "gpuarena_bytes_in_use"
	MetricBytesPeak          = "gpuarena_bytes_peak"
	MetricAllocations        = "gpuarena_allocations_total"
	MetricFrees              = "gpuarena_frees_total"
	MetricAllocationFailures = "gpuarena_allocation_failures_total"
	MetricForwardStep        = "gpuarena_forward_step_seconds"
	MetricMailboxDepth       = "gpuarena_gpu_mailbox_depth"
)

// Constant labels the Collector puts on every metric it exports, the forward
// histogram included: which device the manager's numbers are of.
const (
	// LabelDevice is the device's ordinal as a decimal string ("0"):
	// gpuworker.DeviceInfo.Ordinal (the CUDA device ordinal; "0" for
	// hostsim).
	LabelDevice = "device"
	// LabelDeviceName is the device's name: gpuworker.DeviceInfo.Name
	// ("NVIDIA H200"; hostsim's HostSimConfig.Name, "hostsim" by default).
	LabelDeviceName = "device_name"
)

var (
	descBytesInUse  = prometheus.NewDesc(MetricBytesInUse, "Device bytes this process holds now, by ledger owner.", []string{"owner"}, nil)
	descBytesPeak   = prometheus.NewDesc(MetricBytesPeak, "Most device bytes held at once, by ledger owner.", []string{"owner"}, nil)
	descAllocations = prometheus.NewDesc(MetricAllocations, "Device allocations made since the manager started.", nil, nil)
	descFrees       = prometheus.NewDesc(MetricFrees, "Device allocations freed since the manager started.", nil, nil)
	descFailures    = prometheus.NewDesc(MetricAllocationFailures, "Device allocations refused (out of memory, over budget).", nil, nil)
	descDepth       = prometheus.NewDesc(MetricMailboxDepth, "Requests waiting in the GPU actor's mailbox, not yet taken up.", nil, nil)
)

// newForwardHistogram is the forward-step duration histogram: 10 µs to ~10 s.
func newForwardHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricForwardStep,
		Help:    "Duration of one forward step on the GPU thread, in seconds.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 4, 11),
	})
}

// Collector returns a prometheus.Collector of the manager's metrics: bytes in
// use and peak by owner, allocation, free and failure counts, the
// forward-step duration histogram and the GPU actor's mailbox depth. Every
// metric carries two constant labels, LabelDevice ("device": the device
// ordinal, "0") and LabelDeviceName ("device_name": "NVIDIA H200"), from
// Device(), so managers of different devices register on one registry side
// by side. Register it on the embedder's own registry (never the global one
// by default):
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(m.Collector())
//
// Two managers of the same device ordinal and name in one process (two
// hostsim managers, or two managers sharing a GPU) export the same series, so
// the second Register on one registry fails with a
// prometheus.AlreadyRegisteredError. Give each its own registry, or tell them
// apart with a label of the embedder's choosing:
//
//	prometheus.WrapRegistererWith(prometheus.Labels{"instance": "a"}, reg).MustRegister(a.Collector())
//	prometheus.WrapRegistererWith(prometheus.Labels{"instance": "b"}, reg).MustRegister(b.Collector())
//
// A scrape never waits for the GPU thread: it reads the ledger's totals as
// the GPU thread published them after the last request that changed them
// (gpuworker.Worker.LedgerTotals), so it neither stalls behind a long
// forward step nor drops series; after Close they read 0 bytes. Collector
// returns no error; the collector it returns can be registered on
// any number of registries.
func (m *Manager) Collector() prometheus.Collector {
	info := m.worker.Info()
	return prometheus.WrapCollectorWith(prometheus.Labels{
		LabelDevice:     strconv.Itoa(info.Ordinal),
		LabelDeviceName: info.Name,
	}, collector{m})
}

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBytesInUse, descBytesPeak, descAllocations, descFrees, descFailures, descDepth} {
		ch <- d
	}
	c.m.forwardHist.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(c.m.worker.MailboxDepth()))
	c.m.forwardHist.Collect(ch)
	l := c.m.worker.LedgerTotals()
	for owner, u := range l.Owners {
		ch <- prometheus.MustNewConstMetric(descBytesInUse, prometheus.GaugeValue, float64(u.CurrentBytes), owner)
		ch <- prometheus.MustNewConstMetric(descBytesPeak, prometheus.GaugeValue, float64(u.PeakBytes), owner)
	}
	ch <- prometheus.MustNewConstMetric(descAllocations, prometheus.CounterValue, float64(l.Counters.Allocations))
	ch <- prometheus.MustNewConstMetric(descFrees, prometheus.CounterValue, float64(l.Counters.Frees))
	ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(l.Counters.Failures))
}
