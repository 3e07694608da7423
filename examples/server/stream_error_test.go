package main

import (
	"net/http"
	"strings"
	"testing"
)

// A step that fails after a stream's 200 went out ends the stream with an
// error event, then [DONE], as vLLM's streams end; the engine stops
// serving, so the next request gets a 503 naming the failure.
func TestStreamEndsWithErrorEvent(t *testing.T) {
	ts := startTestServer(t, 4000)
	// Every forward now fails: a batch has more token ids than the model
	// says the arena holds (written before the request, which the forward
	// reads after).
	ts.engine.model.maxIDs = 0
	resp := ts.post(t, "/v1/completions", `{"prompt": "fail me", "max_tokens": 8, "stream": true}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 (the stream starts before the step)", resp.StatusCode)
	}
	chunks, done := readStream(t, resp.Body)
	if len(chunks) == 0 {
		t.Fatalf("no event before [DONE] (%v)", done)
	}
	last := chunks[len(chunks)-1]
	if !done || last.Error == nil || !strings.Contains(last.Error.Message, "generation failed") {
		t.Fatalf("the stream ended with %+v, [DONE] %v; want an error event (generation failed), then [DONE]", last, done)
	}
	var after completion
	if code := ts.postJSON(t, "/v1/completions", `{"prompt": "after", "max_tokens": 2}`, &after); code != http.StatusServiceUnavailable || after.Error == nil {
		t.Fatalf("a request after the failure: %d, %+v; want 503 with an error", code, after.Error)
	}
}
