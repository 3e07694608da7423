package loadgen

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	// (counted in Report.Cut, not as failures) and Run returns.
	Duration time.Duration
	// Seed seeds the workload (the same seed, the same requests).
	Seed uint64
	Mix  Mix
	// Client sends the requests (nil: a client of its own, whose idle
	// connections Run closes).
	Client *http.Client
}

// ErrConfig is wrapped by every ConfigError.
var ErrConfig = errors.New("loadgen: bad config")

// ConfigError is Validate's error: which field of a Config is wrong, its
// value and what it must be. It wraps ErrConfig.
type ConfigError struct {
	// Field is the field's Go path in Config: "Clients",
	// "Mix.PromptTokens".
	Field string
	// Value is the field's value.
	Value any
	// Want says what the field must be: "must be at least 1".
	Want string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: %s %v: %s", ErrConfig, e.Field, e.Value, e.Want)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// Validate checks cfg, its fields in order. Errors: a *ConfigError for
// the first field that is wrong.
func (cfg Config) Validate() error {
	if u, err := url.Parse(cfg.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &ConfigError{Field: "URL", Value: fmt.Sprintf("%q", cfg.URL), Want: "must be an http:// or https:// URL with a host"}
	}
	switch {
	case cfg.Clients < 1:
		return &ConfigError{Field: "Clients", Value: cfg.Clients, Want: "must be at least 1"}
	case cfg.Requests < 1:
		return &ConfigError{Field: "Requests", Value: cfg.Requests, Want: "must be at least 1"}
	case cfg.Duration <= 0:
		return &ConfigError{Field: "Duration", Value: cfg.Duration, Want: "must be positive"}
	}
	return cfg.Mix.validate()
}
