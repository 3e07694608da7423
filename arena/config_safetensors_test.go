package arena

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// A safetensors file given as a config is named as what it is.
func TestParseConfigSafetensors(t *testing.T) {
	header := []byte(`{"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`)
	data := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	data = append(append(data, header...), 1, 2, 3, 4)
	_, err := ParseConfig(data)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "a safetensors file, not a config.json") {
		t.Fatalf("ParseConfig(safetensors): %v", err)
	}
	if _, err := ParseConfig([]byte("not json")); err == nil || strings.Contains(err.Error(), "safetensors") {
		t.Fatalf("ParseConfig(text): %v", err)
	}
}
