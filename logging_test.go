package gpuarena_test

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
	"github.com/gpuarena/gpuarena/internal/testkit"
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

// Without WithLogger, gpuarena writes nothing to the process's default
// logger (slog.Default, and the log package behind it): a library is quiet
// unless asked.
func TestQuietWithoutALogger(t *testing.T) {
	var buf bytes.Buffer
	oldDefault, oldOut, oldFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() {
		slog.SetDefault(oldDefault)
		log.SetOutput(oldOut)
		log.SetFlags(oldFlags)
	})
	m, err := gpuarena.New()
	if err != nil {
		t.Fatal(err)
	}
	plan := testkit.SmallPlan("w")
	if _, err := m.BuildArena(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	mach, err := gpuworker.NewHostSimMachine(machine(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gpuarena.NewGroup(gpuarena.WithDeviceFactories(mach.Factories()...))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("gpuarena logged to the default logger without WithLogger:\n%s", buf.String())
	}
}
