package gpuarena_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena"
)

// gpuarena logs through the embedder's slog logger, structured; protoactor-go's
// informational chatter is filtered out and nothing is coloured.
func TestLogsGoThroughTheEmbeddersLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := gpuarena.New(gpuarena.WithLogger(l))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `"msg":"gpuarena: device opened"`) || !strings.Contains(out, `"backend":"hostsim"`) {
		t.Fatalf("no structured device-opened record in %q", out)
	}
	if strings.Contains(out, "actor system started") || strings.Contains(out, "\x1b[") {
		t.Fatalf("protoactor-go's info chatter or colour codes leaked into %q", out)
	}
}
