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

// Config is one load run.
type Config struct {
	// URL is the server's base URL (http://127.0.0.1:8080).
	URL string
	// Model is the model named in each request ("" asks GET /v1/models).
	Model string
	// Clients is how many clients send at once, each one request at a
	// time; Requests how many requests in all (≥ Clients is useful).
	Clients, Requests int
	// Duration bounds the run: at its end the requests in flight are cut
	// (counted in Report.Cut) and Run returns.
	Duration time.Duration
	// Seed seeds the workload (the same seed, the same requests).
	Seed uint64
	Mix  Mix
	// Client sends the requests (nil: a client of its own, whose idle
	// connections Run closes).
	Client *http.Client
}

// ErrConfig is wrapped by Run's error for a Config it cannot run.
var ErrConfig = errors.New("loadgen: bad config")

// Validate checks cfg. Errors: ErrConfig, saying which field is wrong.
func (cfg Config) Validate() error {
	if cfg.Clients < 1 || cfg.Requests < 1 || cfg.Duration <= 0 || cfg.URL == "" {
		return fmt.Errorf("%w: url %q, %d clients, %d requests, duration %v: want a URL and each ≥ 1", ErrConfig, cfg.URL, cfg.Clients, cfg.Requests, cfg.Duration)
	}
	if err := cfg.Mix.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// Run sends cfg's workload and returns what the clients saw. A request
// that fails (a status other than 200, a stream that ends without
// [DONE]) is counted in Report.Failed with its first errors kept; the
// run goes on. Errors: Validate's, a failure to read the model's name or
// /metrics, ctx's.
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
				results <- stream(rctx, hc, base, model, r)
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
		rep.add(res, rctx.Err() != nil)
		if res.err == nil {
			ttft = append(ttft, res.ttft)
			itl = append(itl, res.itl...)
		}
	}
	rep.Elapsed = time.Since(start)
	rep.Clients, rep.Sent = cfg.Clients, cfg.Requests
	rep.finish(ttft, itl)
	if err := ctx.Err(); err != nil {
		return &rep, err
	}
	after, err := preemptions(ctx, hc, base)
	if err != nil {
		return &rep, err
	}
	rep.Preemptions = int64(after - before)
	return &rep, nil
}

// result is one request as its client saw it.
type result struct {
	tokens int // completion_tokens of the usage chunk
	ttft   time.Duration
	itl    []time.Duration
	err    error
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
