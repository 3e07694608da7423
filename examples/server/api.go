package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpuarena/gpuarena/examples/internal/serving"
)

// API limits.
const (
	// maxRequestBytes is the largest request body read (413 past it).
	maxRequestBytes = 1 << 20
	// maxN is the most choices (n) one request may ask for.
	maxN = 16
	// maxStops is the most stop strings, as the OpenAI API allows.
	maxStops = 4
	// defaultCompletionMaxTokens is max_tokens when a completion request
	// leaves it out (the OpenAI API's default, 16); a chat request gets
	// what the limit leaves after its prompt.
	defaultCompletionMaxTokens = 16
	// maxTemperature is the largest temperature the OpenAI API takes
	// (temperature is in [0, 2]; top_p in [0, 1]).
	maxTemperature = 2
)

// requestError is a bad request: status, the field and the message.
type requestError struct {
	status int
	param  string
	msg    string
}

// badRequest is a 400 for param.
func badRequest(param, format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, param: param, msg: fmt.Sprintf(format, args...)}
}

// generation is what one request asks the engine for.
type generation struct {
	prompt    []int32
	maxTokens int
	n         int
	stops     []string
	seed      uint64
	stream    bool
	usage     bool // stream_options.include_usage
}

// ids numbers responses.
var ids atomic.Uint64

// handleCompletions serves POST /v1/completions.
func (s *server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if !decodeRequest(w, r, &req) {
		return
	}
	g, rerr := s.parseCompletion(&req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	id := "cmpl-" + strconv.FormatUint(ids.Add(1), 10)
	s.serveGeneration(w, r, g, func(chunk bool, texts []string, finish []*string, u *usage) response {
		choices := make([]completionChoice, 0, len(texts))
		for i, t := range texts {
			if chunk && t == "" && finish[i] == nil {
				continue
			}
			choices = append(choices, completionChoice{Index: i, Text: t, FinishReason: finish[i]})
		}
		return response{ID: id, Object: "text_completion", Created: time.Now().Unix(), Model: s.name, Choices: choices, Usage: u}
	})
}

// handleChat serves POST /v1/chat/completions.
func (s *server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decodeRequest(w, r, &req) {
		return
	}
	g, rerr := s.parseChat(&req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	id := "chatcmpl-" + strconv.FormatUint(ids.Add(1), 10)
	first := true
	s.serveGeneration(w, r, g, func(chunk bool, texts []string, finish []*string, u *usage) response {
		object := "chat.completion"
		choices := make([]chatChoice, 0, len(texts))
		for i, t := range texts {
			c := chatChoice{Index: i, FinishReason: finish[i]}
			switch {
			case !chunk:
				c.Message = &chatMessage{Role: "assistant", Content: t}
			case t == "" && finish[i] == nil && !first:
				continue
			default:
				c.Delta = &chatDelta{Content: t}
				if first {
					c.Delta.Role = "assistant"
				}
			}
			choices = append(choices, c)
		}
		if chunk {
			object = "chat.completion.chunk"
			first = false
		}
		return response{ID: id, Object: object, Created: time.Now().Unix(), Model: s.name, Choices: choices, Usage: u}
	})
}

// decodeRequest reads r's body (generating limits it to maxRequestBytes)
// into v: one JSON object, nothing but white space after it. On an error
// it answers 400 (naming the field when one has the wrong type) or 413
// and returns false.
func decodeRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	var tooBig *http.MaxBytesError
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return true
		}
		if !errors.As(err, &tooBig) {
			writeError(w, badRequest("", "request body holds data after its JSON object: send one object, nothing after it"))
			return false
		}
	}
	var wrongType *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, &requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)})
	case errors.As(err, &wrongType) && wrongType.Field != "":
		field := strings.TrimPrefix(wrongType.Field, "samplingFields.")
		writeError(w, badRequest(field, "%s must be %s, not a JSON %s", field, jsonKind(wrongType.Type), wrongType.Value))
	default:
		writeError(w, badRequest("", "request body is not valid JSON for this endpoint: %v", err))
	}
	return false
}

// parseCompletion checks a completion request. Its prompt is text (a
// string, or an array of one string) or token ids (an array of integers,
// or an array of one such array), as OpenAI's API and vLLM take it; a
// batch of several prompts is refused: send one request per prompt.
func (s *server) parseCompletion(req *completionRequest) (generation, *requestError) {
	prompt, rerr := s.promptIDs(req.Prompt)
	if rerr != nil {
		return generation{}, rerr
	}
	g, rerr := s.parseCommon(req.Model, prompt, &req.samplingFields)
	if rerr == nil {
		rerr = unsupportedCompletion(req, g.n)
	}
	if rerr != nil {
		return g, rerr
	}
	return g, s.setMaxTokens(&g, "max_tokens", req.MaxTokens, defaultCompletionMaxTokens)
}

// promptIDs is a completion's prompt as token ids: text through the
// tokenizer, ids as given (each in [0, vocab_size)).
func (s *server) promptIDs(raw json.RawMessage) ([]int32, *requestError) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return encode(text), nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
		return encode(texts[0]), nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) != nil {
		var batch [][]int64
		if json.Unmarshal(raw, &batch) != nil || len(batch) != 1 {
			if len(texts) > 1 || len(batch) > 1 {
				return nil, badRequest("prompt", "a batch of %d prompts: this server takes one prompt a request; send one request per prompt", max(len(texts), len(batch)))
			}
			return nil, badRequest("prompt", "prompt must be a string, an array of one string, or token ids (an array of integers)")
		}
		ids = batch[0]
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(s.vocab) {
			return nil, badRequest("prompt", "prompt token %d is %d: token ids must be in [0, %d) (vocab_size)", i, id, s.vocab)
		}
		out[i] = int32(id)
	}
	return out, nil
}

// parseChat checks a chat request.
func (s *server) parseChat(req *chatRequest) (generation, *requestError) {
	if len(req.Messages) == 0 {
		return generation{}, badRequest("messages", "messages must hold at least one message")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "developer", "tool":
		default:
			return generation{}, badRequest("messages", "messages[%d].role %q: want system, developer, user, assistant or tool", i, m.Role)
		}
	}
	g, rerr := s.parseCommon(req.Model, encode(chatPrompt(req.Messages)), &req.samplingFields)
	if rerr == nil {
		rerr = unsupportedChat(req)
	}
	if rerr != nil {
		return g, rerr
	}
	param, mt := "max_tokens", req.MaxTokens
	if req.MaxCompletionTokens != nil {
		param, mt = "max_completion_tokens", req.MaxCompletionTokens
	}
	return g, s.setMaxTokens(&g, param, mt, s.limit-len(g.prompt))
}

// parseCommon checks what both endpoints share; prompt is the prompt's
// token ids.
func (s *server) parseCommon(model string, prompt []int32, f *samplingFields) (generation, *requestError) {
	g := generation{prompt: prompt, n: 1, stream: f.Stream}
	switch {
	case model != "" && model != s.name:
		return g, &requestError{status: http.StatusNotFound, param: "model", msg: fmt.Sprintf("model %q does not exist; this server serves %q", model, s.name)}
	case len(prompt) == 0:
		return g, badRequest("prompt", "the prompt is empty")
	}
	if f.N != nil {
		if *f.N < 1 || *f.N > maxN {
			return g, badRequest("n", "n is %d: it must be in [1, %d]", *f.N, maxN)
		}
		g.n = *f.N
	}
	if t := f.Temperature; t != nil && (*t < 0 || *t > maxTemperature) {
		return g, badRequest("temperature", "temperature is %g: it must be in [0, %d]", *t, maxTemperature)
	}
	if p := f.TopP; p != nil && (*p < 0 || *p > 1) {
		return g, badRequest("top_p", "top_p is %g: it must be in [0, 1]", *p)
	}
	if len(f.Stop) > 0 && string(f.Stop) != "null" {
		var one string
		if err := json.Unmarshal(f.Stop, &one); err == nil {
			g.stops = []string{one}
		} else if err := json.Unmarshal(f.Stop, &g.stops); err != nil {
			return g, badRequest("stop", "stop must be a string or an array of strings")
		}
		if len(g.stops) > maxStops {
			return g, badRequest("stop", "%d stop strings: at most %d", len(g.stops), maxStops)
		}
		for _, st := range g.stops {
			if st == "" {
				return g, badRequest("stop", "a stop string is empty")
			}
		}
	}
	if f.Seed != nil {
		g.seed = uint64(*f.Seed)
	}
	g.usage = f.StreamOptions != nil && f.StreamOptions.IncludeUsage
	return g, nil
}

// setMaxTokens sets g's max_tokens from the request (def when absent) and
// checks the request's length against the limit.
func (s *server) setMaxTokens(g *generation, param string, mt *int, def int) *requestError {
	g.maxTokens = def
	if mt != nil {
		if *mt < 1 {
			return badRequest(param, "%s is %d: it must be at least 1", param, *mt)
		}
		g.maxTokens = *mt
	}
	if max(g.maxTokens, 1) > s.limit-len(g.prompt) {
		field := param
		if len(g.prompt) >= s.limit { // the prompt alone is too long: no max_tokens would do
			field = "prompt"
		}
		return &requestError{status: http.StatusBadRequest, param: field, msg: fmt.Sprintf(
			"this model's maximum context length is %d tokens (min(max_seq_len, what the KV cache holds)); you requested %d tokens (%d in the prompt, %d for the completion): shorten the prompt or lower %s",
			s.limit, len(g.prompt)+g.maxTokens, len(g.prompt), g.maxTokens, param)}
	}
	return nil
}

// render makes a response (chunk: a stream's chunk) of the choices'
// texts and finish reasons, with usage when not nil.
type render func(chunk bool, texts []string, finish []*string, u *usage) response

// serveGeneration runs g through the engine and answers, streaming or
// not. A client that goes away ends its choices (their blocks are freed
// at the engine's next step).
func (s *server) serveGeneration(w http.ResponseWriter, r *http.Request, g generation, mk render) {
	ctx := r.Context()
	reqs := make([]serving.LiveRequest, g.n)
	seeds := make([]uint64, g.n)
	for i := range reqs {
		reqs[i] = serving.LiveRequest{Prompt: g.prompt, MaxTokens: g.maxTokens}
		seeds[i] = g.seed*uint64(maxN) + uint64(i)
	}
	sub, err := s.engine.submit(ctx, reqs, seeds)
	if err != nil {
		var le *serving.LengthError
		switch {
		case errors.As(err, &le):
			param := "max_tokens"
			if le.PromptTokens >= le.Limit { // the prompt alone is too long: no max_tokens would do
				param = "prompt"
			}
			writeError(w, badRequest(param, "%v", err))
		case ctx.Err() != nil:
		default:
			writeError(w, &requestError{status: http.StatusServiceUnavailable, msg: err.Error()})
		}
		return
	}
	texts := make([]string, g.n)
	finish := make([]*string, g.n)
	// The prompt counts once, however many choices share it, as vLLM
	// (serving_completion.py request_output_to_completion_response and
	// completion_stream_generator, serving_chat.py
	// chat_completion_full_generator: len(prompt_token_ids) per prompt)
	// and OpenAI count it.
	counted := usage{PromptTokens: len(g.prompt)}
	var sse *sseWriter
	if g.stream {
		sse = newSSEWriter(w)
	}
	err = s.collect(ctx, sub, g, &counted, func(choice int, text string, reason string) error {
		if !g.stream {
			texts[choice] += text
			if reason != "" {
				finish[choice] = &reason
			}
			return nil
		}
		t := make([]string, g.n)
		f := make([]*string, g.n)
		t[choice] = text
		if reason != "" {
			f[choice] = &reason
		}
		return sse.send(mk(true, t, f, nil))
	})
	counted.TotalTokens = counted.PromptTokens + counted.CompletionTokens
	if err != nil {
		s.engine.cancel(sub, finishAbort)
		switch {
		case ctx.Err() != nil: // the client is gone
		case !g.stream:
			writeError(w, &requestError{status: http.StatusServiceUnavailable, msg: err.Error()})
		case errors.Is(err, errChoiceFailed):
			// The stream's 200 is sent: end it as vLLM does
			// (serving_completion.py completion_stream_generator), with
			// an error event, then [DONE].
			if sse.send(apiError{Error: apiErrorBody{Message: err.Error(), Type: "server_error"}}) == nil {
				sse.done()
			}
		}
		return
	}
	if !g.stream {
		writeJSON(w, http.StatusOK, mk(false, texts, finish, &counted))
		return
	}
	if g.usage {
		if sse.send(mk(true, nil, nil, &counted)) != nil {
			return
		}
	}
	sse.done()
}

// errChoiceFailed is collect's error for a choice the engine ended with an
// error (a failed step, a KV cache too small).
var errChoiceFailed = errors.New("server: generation failed")

// collect reads sub's events until every choice ended, calling emit with
// each piece of text a choice may send and, at its end, its finish
// reason; it applies the stop strings and counts completion tokens.
// Errors: emit's (the client is gone), the context's, or a choice that
// ended with an error (a step failed, the KV cache is too small).
func (s *server) collect(ctx context.Context, sub *submission, g generation, u *usage, emit func(choice int, text, reason string) error) error {
	matchers := make([]stopMatcher, g.n)
	ended := make([]bool, g.n)
	for i := range matchers {
		matchers[i].stops = g.stops
	}
	for left := g.n; left > 0; {
		var ev event
		select {
		case ev = <-sub.events:
		case <-ctx.Done():
			return ctx.Err()
		}
		c := ev.choice
		if ended[c] {
			continue
		}
		if ev.finish != "" {
			ended[c] = true
			left--
			if ev.err != nil {
				return fmt.Errorf("%w: %w", errChoiceFailed, ev.err)
			}
			if err := emit(c, matchers[c].flush(), ev.finish); err != nil {
				return err
			}
			continue
		}
		u.CompletionTokens++
		text, hit := matchers[c].push(decode(ev.token))
		if hit {
			ended[c] = true
			left--
			s.engine.cancel(&submission{keys: sub.keys[c : c+1]}, finishStop)
			if err := emit(c, text, finishStop); err != nil {
				return err
			}
			continue
		}
		if text != "" {
			if err := emit(c, text, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonKind is what a JSON value must be to decode into t, for messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// writeError answers rerr as the OpenAI API's error body.
func writeError(w http.ResponseWriter, rerr *requestError) {
	body := apiError{Error: apiErrorBody{Message: rerr.msg, Type: "invalid_request_error"}}
	if rerr.status >= 500 {
		body.Error.Type = "server_error"
	}
	if rerr.param != "" {
		body.Error.Param = &rerr.param
	}
	writeJSON(w, rerr.status, body)
}

// handleModels serves GET /v1/models: the one model served.
func (s *server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{{
		"id": s.name, "object": "model", "created": s.started.Unix(), "owned_by": "gpuarena", "max_model_len": s.limit,
	}}})
}

// writeJSON writes v as the response body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sseWriter writes server-sent events, flushing each.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// newSSEWriter starts an event stream on w.
func newSSEWriter(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// send writes one "data: JSON" event. Errors: the connection's.
func (s *sseWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "data: %s\n\n", b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// done ends the stream with "data: [DONE]".
func (s *sseWriter) done() {
	if _, err := fmt.Fprint(s.w, "data: [DONE]\n\n"); err == nil {
		_ = s.rc.Flush()
	}
}
