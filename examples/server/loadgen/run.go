package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Run sends cfg's workload and returns what the clients saw. A request
// that fails (a status other than 200, a stream that ends without
// [DONE]) is counted in Report.Failed with its first errors kept and the
// run goes on; one that Duration or ctx cuts is counted in Report.Cut.
// Errors, without a report: Validate's, a failure to read the model's
// name or /metrics before the run. With the report: a
// *RequestsFailedError when any request failed, joined with ctx's or a
// failure to read /metrics after the run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := cfg.Client
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Clients
		hc = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	base := strings.TrimSuffix(cfg.URL, "/")
	model := cfg.Model
	if model == "" {
		var err error
		if model, err = modelName(ctx, hc, base); err != nil {
			return nil, err
		}
	}
	before, err := preemptions(ctx, hc, base)
	if err != nil {
		return nil, err
	}
	reqs := workload(cfg.Mix, cfg.Requests, cfg.Seed)
	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	jobs := make(chan request)
	results := make(chan result, cfg.Clients)
	var wg sync.WaitGroup
	for range min(cfg.Clients, cfg.Requests) {
		wg.Go(func() {
			for r := range jobs {
				res := stream(rctx, hc, base, model, r)
				res.cut = res.err != nil && rctx.Err() != nil
				results <- res
			}
		})
	}
	start := time.Now()
	go func() {
		defer close(jobs)
		for _, r := range reqs {
			select {
			case jobs <- r:
			case <-rctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	var rep Report
	var ttft, itl []time.Duration
	for res := range results {
		rep.add(res)
		if res.err == nil {
			ttft = append(ttft, res.ttft)
			itl = append(itl, res.itl...)
		}
	}
	rep.Elapsed = time.Since(start)
	rep.Clients, rep.Requests = cfg.Clients, cfg.Requests
	rep.finish(ttft, itl)
	err = ctx.Err()
	if err == nil {
		var after float64
		if after, err = preemptions(ctx, hc, base); err == nil {
			rep.Preemptions = int64(after - before)
		}
	}
	return &rep, errors.Join(rep.failure(), err)
}

// result is one request as its client saw it.
type result struct {
	tokens int // completion_tokens of the usage chunk
	ttft   time.Duration
	itl    []time.Duration
	err    error
	cut    bool // err came after the run's Duration or ctx ended
}

// stream sends r as a streaming completion and reads it to [DONE],
// timing each chunk that carries text.
func stream(ctx context.Context, hc *http.Client, base, model string, r request) result {
	body, err := json.Marshal(map[string]any{"model": model, "prompt": r.prompt, "max_tokens": r.maxTokens,
		"stream": true, "stream_options": map[string]bool{"include_usage": true}})
	if err != nil {
		return result{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return result{err: fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))}
	}
	var res result
	var last time.Time
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return res
		}
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return result{err: fmt.Errorf("chunk %q: %w", line, err)}
		}
		if c.Usage != nil {
			res.tokens = c.Usage.CompletionTokens
		}
		if len(c.Choices) == 0 || c.Choices[0].Text == "" {
			continue
		}
		now := time.Now()
		if last.IsZero() {
			res.ttft = now.Sub(sent)
		} else {
			res.itl = append(res.itl, now.Sub(last))
		}
		last = now
	}
	err = sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return result{err: fmt.Errorf("stream ended without [DONE]: %w", err)}
}

// modelName is the first model GET /v1/models lists.
func modelName(ctx context.Context, hc *http.Client, base string) (string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := getJSON(ctx, hc, base+"/v1/models", &list); err != nil {
		return "", err
	}
	if len(list.Data) == 0 {
		return "", fmt.Errorf("loadgen: %s/v1/models lists no model", base)
	}
	return list.Data[0].ID, nil
}

// getJSON decodes the JSON answer of GET url into v.
func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("loadgen: GET %s: status %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
