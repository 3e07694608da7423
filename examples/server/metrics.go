package main

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuarena/gpuarena/examples/internal/serving"
	"github.com/gpuarena/gpuarena/kvcache"
)

// serverMetrics are the server's own metrics, beside the manager's
// (Manager.Collector) on the same registry.
type serverMetrics struct {
	ttft, itl   prometheus.Histogram
	overhead    prometheus.Histogram
	queue       prometheus.Gauge
	running     prometheus.Gauge
	kvBlocks    *prometheus.GaugeVec
	kvUsed      prometheus.Gauge // kvBlocks' children, looked up once
	kvCached    prometheus.Gauge
	kvFree      prometheus.Gauge
	prefixRate  prometheus.Gauge
	preemptions prometheus.Counter
	requests    *prometheus.CounterVec
}

// newServerMetrics registers the server's metrics on reg.
func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	latency := prometheus.ExponentialBuckets(100e-6, 2, 18) // 100 µs to ~13 s
	m := &serverMetrics{
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpuarena_server_time_to_first_token_seconds",
			Help: "Time from a choice's admission to the queue to its first token, in seconds.", Buckets: latency}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpuarena_server_inter_token_latency_seconds",
			Help: "Time between two tokens of one choice, in seconds.", Buckets: latency}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpuarena_server_step_overhead_seconds",
			Help:    "How long the GPU thread waited for a step's forward after the previous forward ended (or after the step's scheduling began, after an idle spell): the scheduler's overhead the device sees, with steps overlapped, in seconds.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 16)}), // 10 µs to ~330 ms
		queue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuarena_server_queue_depth",
			Help: "Sequences waiting for admission (preempted ones included)."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuarena_server_running_sequences",
			Help: "Sequences holding KV blocks and generating."}),
		kvBlocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpuarena_server_kv_blocks",
			Help: "KV blocks of the first KV cache group by state: used (in a sequence's table), cached (free, holding a prefix), free."}, []string{"state"}),
		prefixRate: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuarena_server_prefix_hit_rate",
			Help: "Prompt tokens found in the prefix cache over prompt tokens admitted, since start."}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpuarena_server_preemptions_total",
			Help: "Running sequences preempted (freed, to be computed again) for lack of KV blocks."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpuarena_server_requests_total",
			Help: "Generation requests answered, by endpoint and the HTTP status sent (a stream its client cut: 200; a client gone before any answer: 499)."}, []string{"endpoint", "code"}),
	}
	reg.MustRegister(m.ttft, m.itl, m.overhead, m.queue, m.running, m.kvBlocks, m.prefixRate, m.preemptions, m.requests)
	m.kvUsed, m.kvCached, m.kvFree = m.kvBlocks.WithLabelValues("used"), m.kvBlocks.WithLabelValues("cached"), m.kvBlocks.WithLabelValues("free")
	return m
}

// statusClientClosed is the code counted for a request whose client went
// away before anything was sent (nginx's 499, "client closed request");
// it is never sent.
const statusClientClosed = 499

// statusWriter is a ResponseWriter that keeps the status it sent.
type statusWriter struct {
	http.ResponseWriter
	status int // 0 until the header is written
}

// WriteHeader sends the header with code and keeps code.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= http.StatusOK {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write sends b (after a 200 header when none was sent).
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is the ResponseWriter it wraps (http.ResponseController's
// Flush goes through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countRequest counts an answered request of endpoint by the status w
// sent: a stream's 200 also when its client cut it; statusClientClosed
// when nothing was sent because r's client went away (otherwise net/http
// sends 200 for a handler that wrote nothing).
func (m *serverMetrics) countRequest(endpoint string, w *statusWriter, r *http.Request) {
	code := w.status
	if code == 0 {
		code = http.StatusOK
		if r.Context().Err() != nil {
			code = statusClientClosed
		}
	}
	m.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
}

// observeStep records a scheduled step.
func (m *serverMetrics) observeStep(b serving.Batch, s *serving.Live) {
	m.queue.Set(float64(s.Waiting()))
	m.running.Set(float64(s.Running()))
	m.preemptions.Add(float64(b.Preemptions))
	if len(b.Counts) > 0 {
		c := b.Counts[0]
		m.kvUsed.Set(float64(c.Used))
		m.kvCached.Set(float64(c.Cached))
		m.kvFree.Set(float64(c.Free))
	}
	if st := s.Stats(); st.PrefillTokens > 0 {
		m.prefixRate.Set(float64(st.CachedTokens) / float64(st.PrefillTokens))
	}
}

// kvSample is the first KV group's blocks at one time.
type kvSample struct {
	At                        time.Time
	Used, Cached, Free, Total int
}

// kvHistory keeps the KV cache's use over the last historyWindow, one
// sample per historyEvery at most, for the memory page.
type kvHistory struct {
	mu      sync.Mutex
	samples []kvSample
}

const (
	historyWindow = 5 * time.Minute
	historyEvery  = time.Second
)

// add records counts at now, unless the last sample is more recent than
// historyEvery; samples older than historyWindow are dropped.
func (h *kvHistory) add(now time.Time, counts []kvcache.GroupCounts) {
	if len(counts) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.samples); n > 0 && now.Sub(h.samples[n-1].At) < historyEvery {
		return
	}
	c := counts[0]
	h.samples = append(h.samples, kvSample{At: now, Used: c.Used, Cached: c.Cached, Free: c.Free, Total: c.Total})
	drop := 0
	for drop < len(h.samples) && now.Sub(h.samples[drop].At) > historyWindow {
		drop++
	}
	h.samples = h.samples[drop:]
}

// snapshot returns a copy of the samples, oldest first.
func (h *kvHistory) snapshot() []kvSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]kvSample(nil), h.samples...)
}
