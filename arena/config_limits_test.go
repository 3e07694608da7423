package arena

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// padded is the llama config followed by spaces up to size bytes.
func padded(t *testing.T, size int) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "configs", "llama-3.1-8b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > size {
		t.Fatalf("llama config is %d bytes, more than %d", len(data), size)
	}
	return append(data, bytes.Repeat([]byte(" "), size-len(data))...)
}

// assertTooLarge checks that err is the *ConfigError for input past a limit.
func assertTooLarge(t *testing.T, err error, wants ...string) *ConfigError {
	t.Helper()
	var ce *ConfigError
	if !errors.Is(err, ErrConfigTooLarge) || !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConfigError wrapping ErrConfigTooLarge and ErrInvalidConfig", err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not say %q", err, w)
		}
	}
	return ce
}

func TestParseConfigSizeCap(t *testing.T) {
	if _, err := ParseConfig(padded(t, MaxConfigBytes)); err != nil {
		t.Fatalf("a config of exactly MaxConfigBytes: %v", err)
	}
	_, err := ParseConfig(padded(t, MaxConfigBytes+1))
	assertTooLarge(t, err, "input is 4194305 bytes", "limit of 4194304 bytes", "MaxConfigBytes", "config.json")
}

func TestLoadConfigSizeCap(t *testing.T) {
	dir := t.TempDir()
	over := filepath.Join(dir, "over.json")
	if err := os.WriteFile(over, padded(t, MaxConfigBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(over)
	assertTooLarge(t, err, over, "input is 4194305 bytes", "limit of 4194304 bytes")

	// A sparse 1 TiB file: refused from its size, nothing read.
	huge := filepath.Join(dir, "huge.json")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		f.Close()
		t.Skipf("no sparse 1 TiB file here: %v", err)
	}
	f.Close()
	_, err = LoadConfig(huge)
	assertTooLarge(t, err, huge, "input is 1099511627776 bytes")
}

// endless is an io.Reader of zero bytes that never ends and counts what it gave.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	clear(p)
	e.read += int64(len(p))
	return len(p), nil
}

func TestReadAtMostStopsAtTheCap(t *testing.T) {
	src := &endless{}
	data, err := readAtMost(src)
	assertTooLarge(t, err, "more than 4194304 bytes")
	if data != nil || src.read != MaxConfigBytes+1 {
		t.Errorf("read %d bytes (returned %d), want exactly MaxConfigBytes+1 = %d read and nothing returned",
			src.read, len(data), MaxConfigBytes+1)
	}
	data, err = readAtMost(io.LimitReader(&endless{}, MaxConfigBytes))
	if err != nil || len(data) != MaxConfigBytes {
		t.Errorf("MaxConfigBytes bytes: %d, %v", len(data), err)
	}
}

// jsonList is a JSON array of n copies of elem.
func jsonList(elem string, n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
}

func TestArrayLimits(t *testing.T) {
	const llama, dsv4 = "llama-3.1-8b.json", "deepseek-v4-flash.json"
	tests := []struct {
		name  string
		file  string
		field string
		value string
		want  int64  // entry count in the error
		limit string // constant named by the message
	}{
		{"architectures", llama, "architectures", jsonList(`"LlamaForCausalLM"`, MaxArchitectures+1), MaxArchitectures + 1, "MaxArchitectures"},
		{"layer_types", llama, "layer_types", jsonList(`"full_attention"`, MaxLayers+1), MaxLayers + 1, "MaxLayers"},
		{"layer_types of integers", llama, "layer_types", jsonList("0", MaxLayers+1), MaxLayers + 1, "MaxLayers"},
		{"compress_ratios", dsv4, "compress_ratios", jsonList("4", MaxArrayEntries+1), MaxArrayEntries + 1, "MaxArrayEntries"},
		{"mlp_only_layers", "qwen3-30b-a3b.json", "mlp_only_layers", jsonList("0", MaxArrayEntries+1), MaxArrayEntries + 1, "MaxArrayEntries"},
		{"modules_to_not_convert", llama, "quantization_config",
			`{"quant_method":"fp8","modules_to_not_convert":` + jsonList(`"lm_head"`, MaxArrayEntries+1) + `}`, MaxArrayEntries + 1, "MaxArrayEntries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(mutate(t, tt.file, map[string]string{tt.field: tt.value}))
			ce := assertTooLarge(t, err, "arena."+tt.limit)
			if ce.Value != tt.want || !strings.HasPrefix(ce.Field, tt.field) {
				t.Errorf("field %q value %#v, want %q… %d", ce.Field, ce.Value, tt.field, tt.want)
			}
		})
	}
	t.Run("at the limits", func(t *testing.T) {
		cfg, err := ParseConfig(mutate(t, llama, map[string]string{
			"architectures": jsonList(`"LlamaForCausalLM"`, MaxArchitectures),
			"layer_types":   jsonList(`"full_attention"`, 32),
		}))
		if err != nil || len(cfg.Architectures) != MaxArchitectures {
			t.Fatalf("%d architectures: %v", MaxArchitectures, err)
		}
	})
}

// TestLongArrayRefusedBeforeDecoding: an array of two million entries in a
// config just under MaxConfigBytes is refused having allocated about the
// input once (the top-level object's raw values), not the 24 B a
// json.RawMessage per entry that decoding it would take.
func TestLongArrayRefusedBeforeDecoding(t *testing.T) {
	data := mutate(t, "llama-3.1-8b.json", map[string]string{"layer_types": jsonList("0", 2_000_000)})
	if len(data) > MaxConfigBytes {
		t.Fatalf("input %d bytes", len(data))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ParseConfig(data)
	runtime.ReadMemStats(&after)
	assertTooLarge(t, err, "2000000", "arena.MaxLayers")
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*uint64(len(data)) {
		t.Errorf("ParseConfig allocated %d B for a %d B input: the array was decoded", alloc, len(data))
	}
}

func TestArrayLen(t *testing.T) {
	tests := []struct {
		raw  string
		want int
	}{
		{`[]`, 0},
		{"[ \n\t]", 0},
		{`[1]`, 1},
		{`[1, 2 ,3]`, 3},
		{`["a,b", "c"]`, 2},
		{`["a\"],[", 1]`, 2},
		{`["\\", 1]`, 2},
		{`[[1, 2], {"a": 1, "b": [3, 4]}, null]`, 3},
		{`[[]]`, 1},
		{`[{}]`, 1},
		{`{"a": [1, 2]}`, -1},
		{`"[1, 2]"`, -1},
		{``, -1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.raw), func(t *testing.T) {
			if got := arrayLen([]byte(tt.raw)); got != tt.want {
				t.Errorf("arrayLen(%s) = %d, want %d", tt.raw, got, tt.want)
			}
		})
	}
}
