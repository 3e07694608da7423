package gpuarena

import (
	"context"
	"log/slog"
)

// minLevelHandler passes records at or above min to the wrapped handler. It
// keeps protoactor-go's informational chatter ("actor system started") out of
// an embedder's logs while its warnings and errors get through.
type minLevelHandler struct {
	slog.Handler
	min slog.Level
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevelHandler{h.Handler.WithAttrs(as), h.min}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{h.Handler.WithGroup(name), h.min}
}
