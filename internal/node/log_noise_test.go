package node

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestQuietHandlerRateLimitsRepeatedUpstreamErrors logs automanaged's
// per-poll failure for one seed every 2 s for three minutes of a fake
// clock: it comes out as a warning once a minute with the repeats counted,
// another seed's failure is kept apart, and other records pass unchanged.
func TestQuietHandlerRateLimitsRepeatedUpstreamErrors(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1_000_000, 0)
	h := newQuietHandler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}), func() time.Time { return now })
	log := slog.New(h).With("lib", "protoactor")
	const msg = "Bad connection to the node health status"
	dead := errors.New("connection refused")
	for i := range 90 { // every 2 s for 180 s
		log.Error(msg, slog.Any("error", dead), slog.String("autoManMemberUrl", "http://127.0.0.1:7701/_health"))
		if i == 0 {
			log.Error(msg, slog.Any("error", dead), slog.String("autoManMemberUrl", "http://127.0.0.1:7703/_health"))
		}
		now = now.Add(2 * time.Second)
	}
	log.Error("something else failed", slog.Any("error", dead))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"level=WARN msg=\"" + msg + "\" lib=protoactor error=\"connection refused\" autoManMemberUrl=http://127.0.0.1:7701/_health repeats=0",
		"level=WARN msg=\"" + msg + "\" lib=protoactor error=\"connection refused\" autoManMemberUrl=http://127.0.0.1:7703/_health repeats=0",
		"level=WARN msg=\"" + msg + "\" lib=protoactor error=\"connection refused\" autoManMemberUrl=http://127.0.0.1:7701/_health repeats=29",
		"level=WARN msg=\"" + msg + "\" lib=protoactor error=\"connection refused\" autoManMemberUrl=http://127.0.0.1:7701/_health repeats=29",
		"level=ERROR msg=\"something else failed\" lib=protoactor error=\"connection refused\"",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, l := range lines {
		_, rest, _ := strings.Cut(l, " ") // time=…
		if !strings.HasPrefix(rest, want[i]) {
			t.Errorf("line %d:\n got %s\nwant %s…", i, rest, want[i])
		}
	}
}

// TestQuietHandlerDowngradesTheEndpointsClosedServer: the membership
// endpoint's "stopping" error after Shutdown (http.ErrServerClosed) is a
// debug line; with another error it stays an error.
func TestQuietHandlerDowngradesTheEndpointsClosedServer(t *testing.T) {
	var out bytes.Buffer
	h := newQuietHandler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}), time.Now)
	slog.New(h).Error(membershipEndpointStopped, slog.Any("error", http.ErrServerClosed))
	if out.Len() != 0 {
		t.Fatalf("closed server logged at info or above: %s", out.String())
	}
	slog.New(h).Error(membershipEndpointStopped, slog.Any("error", fmt.Errorf("listen: %w", errors.New("address in use"))))
	if !strings.Contains(out.String(), "level=ERROR") {
		t.Fatalf("a failed endpoint not logged as an error: %q", out.String())
	}
}

// TestQuietHandlerKeepsLostConnectionsThatWereNotClosedHere: a connection
// this side closed (codes.Canceled) is an info line, one the peer dropped
// stays an error.
func TestQuietHandlerKeepsLostConnectionsThatWereNotClosedHere(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(newQuietHandler(slog.NewTextHandler(&out, nil), time.Now))
	log.Error(endpointClosed, slog.Any("error", status.Error(codes.Canceled, "grpc: the client connection is closing")))
	log.Error(endpointClosed, slog.Any("error", status.Error(codes.Unavailable, "error reading from server: EOF")))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[1], "level=ERROR") {
		t.Fatalf("got:\n%s\nwant the closed connection at info, the dropped one at error", out.String())
	}
}
