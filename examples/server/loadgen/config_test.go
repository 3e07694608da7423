package loadgen

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// Validate names the first wrong field, its value and what it must be.
func TestLoadgenValidateNamesTheField(t *testing.T) {
	good := Config{URL: "http://127.0.0.1:1", Clients: 1, Requests: 1, Duration: time.Second, Mix: DefaultMix}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, field, msg string
		edit             func(*Config)
	}{
		{"no url", "URL", `URL "": must be an http:// or https:// URL`, func(c *Config) { c.URL = "" }},
		{"no scheme", "URL", "URL", func(c *Config) { c.URL = "127.0.0.1:8080" }},
		{"no host", "URL", "with a host", func(c *Config) { c.URL = "http://" }},
		{"no clients", "Clients", "Clients 0: must be at least 1", func(c *Config) { c.Clients = 0 }},
		{"no requests", "Requests", "Requests -3: must be at least 1", func(c *Config) { c.Requests = -3 }},
		{"no duration", "Duration", "Duration 0s: must be positive", func(c *Config) { c.Duration = 0 }},
		{"prompt range", "Mix.PromptTokens", "Mix.PromptTokens [10 5]: must be min,max", func(c *Config) { c.Mix.PromptTokens = [2]int{10, 5} }},
		{"output range", "Mix.OutputTokens", "1 ≤ min ≤ max", func(c *Config) { c.Mix.OutputTokens = [2]int{0, 5} }},
		{"fraction", "Mix.SharedFraction", "Mix.SharedFraction 2: must be in [0, 1]", func(c *Config) { c.Mix.SharedFraction = 2 }},
		{"fraction NaN", "Mix.SharedFraction", "NaN", func(c *Config) { c.Mix.SharedFraction = math.NaN() }},
		{"no prefixes", "Mix.SharedPrefixes", "Mix.SharedPrefixes 0: must be at least 1", func(c *Config) { c.Mix.SharedPrefixes = 0 }},
		{"prefix too long", "Mix.PrefixTokens", "Mix.PrefixTokens 17: must be 1 to 16, the shortest prompt", func(c *Config) { c.Mix.PrefixTokens = 17 }},
	} {
		c := good
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want a ConfigError for %s saying %q", tc.name, err, tc.field, tc.msg)
		}
	}
	// No shared fraction: the prefixes are not drawn, so not checked.
	c := good
	c.Mix.SharedFraction, c.Mix.SharedPrefixes, c.Mix.PrefixTokens = 0, -1, -1
	if err := c.Validate(); err != nil {
		t.Errorf("shared fraction 0 with no prefixes: %v", err)
	}
}

// A mix Validate takes draws requests within its ranges without
// panicking; one it refuses is a ConfigError of a Mix field.
func FuzzLoadgenMix(f *testing.F) {
	d := DefaultMix
	f.Add(d.PromptTokens[0], d.PromptTokens[1], d.OutputTokens[0], d.OutputTokens[1], d.SharedPrefixes, d.PrefixTokens, d.SharedFraction, uint64(1))
	f.Add(8, 20, 1, 1, -1, -1, 0.0, uint64(2))
	f.Add(1, 1, 1, math.MaxInt, 1, 1, 1.0, uint64(3))
	f.Add(5, 4, 1, 2, 1, 1, 0.5, uint64(4))
	f.Fuzz(func(t *testing.T, p0, p1, o0, o1, prefixes, prefixTokens int, fraction float64, seed uint64) {
		m := Mix{PromptTokens: [2]int{p0, p1}, OutputTokens: [2]int{o0, o1}, SharedPrefixes: prefixes, PrefixTokens: prefixTokens, SharedFraction: fraction}
		if err := m.validate(); err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Field, "Mix.") {
				t.Fatalf("%+v: %v, want a ConfigError of a Mix field", m, err)
			}
			return
		}
		if p1 > 1<<14 || prefixes > 64 {
			return // valid, but too large to draw here
		}
		for i, r := range workload(m, 8, seed) {
			if n := len(r.prompt); n < p0 || n > p1 || r.maxTokens < o0 || r.maxTokens > o1 {
				t.Fatalf("%+v: request %d has %d prompt tokens, max_tokens %d", m, i, n, r.maxTokens)
			}
		}
	})
}
