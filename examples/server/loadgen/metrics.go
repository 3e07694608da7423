package loadgen

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// PreemptionsMetric is the server's counter of preempted sequences
// (examples/server's metrics.go).
const PreemptionsMetric = "gpuarena_server_preemptions_total"

// preemptions reads PreemptionsMetric from base's /metrics (Prometheus'
// text format). Errors: the request's, the parser's, or a server that
// does not export it.
func preemptions(ctx context.Context, hc *http.Client, base string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("loadgen: /metrics: %w", err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("loadgen: /metrics: %w", err)
	}
	f := families[PreemptionsMetric]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("loadgen: %s/metrics has no %s", base, PreemptionsMetric)
	}
	return f.GetMetric()[0].GetCounter().GetValue(), nil
}
