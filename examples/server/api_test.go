package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A completion is reproducible, its stream carries the same text, and its
// usage counts the tokens; n choices differ from each other.
func TestCompletionStreamAndNot(t *testing.T) {
	ts := startTestServer(t, 4000)
	body := `{"prompt": "The ledger says", "max_tokens": 12, "n": 3, "seed": 5}`
	var a, b completion
	if code := ts.postJSON(t, "/v1/completions", body, &a); code != 200 || len(a.Choices) != 3 {
		t.Fatalf("status %d, %+v", code, a)
	}
	ts.postJSON(t, "/v1/completions", body, &b)
	for i := range a.Choices {
		if a.Choices[i].Text != b.Choices[i].Text || a.Choices[i].Text == "" || *a.Choices[i].FinishReason != "length" {
			t.Fatalf("choice %d: %q then %q (%v): want the same non-empty text, finish length", i, a.Choices[i].Text, b.Choices[i].Text, *a.Choices[i].FinishReason)
		}
	}
	if a.Choices[0].Text == a.Choices[1].Text {
		t.Fatalf("choices 0 and 1 are both %q", a.Choices[0].Text)
	}
	// The prompt counts once for the three choices that share it.
	if u := a.Usage; u.PromptTokens != len("The ledger says") || u.CompletionTokens != 36 || u.TotalTokens != u.PromptTokens+36 {
		t.Fatalf("usage %+v", u)
	}
	resp := ts.post(t, "/v1/completions", strings.Replace(body, `"seed"`, `"stream": true, "stream_options": {"include_usage": true}, "seed"`, 1))
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	chunks, done := readStream(t, resp.Body)
	texts := make([]string, 3)
	finished := 0
	for _, c := range chunks {
		for _, ch := range c.Choices {
			texts[ch.Index] += ch.Text
			if ch.FinishReason != nil {
				finished++
			}
		}
	}
	last := chunks[len(chunks)-1]
	if !done || finished != 3 || last.Usage == nil || *last.Usage != *a.Usage {
		t.Fatalf("stream: done %v, %d finished, last chunk %+v", done, finished, last)
	}
	for i := range texts {
		if texts[i] != a.Choices[i].Text {
			t.Fatalf("choice %d streamed %q, not streamed %q", i, texts[i], a.Choices[i].Text)
		}
	}
	if seqs, used := ts.kvClean(t); seqs != 0 || used != 0 {
		t.Fatalf("after the requests: %d sequences, %d blocks used", seqs, used)
	}
}

// A stop string ends a choice before it, with finish_reason stop, in
// both modes; the chat endpoint answers as an assistant message.
func TestStopStrings(t *testing.T) {
	ts := startTestServer(t, 4000)
	var full completion
	ts.postJSON(t, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}`, &full)
	text := full.Choices[0].Message.Content
	words := strings.Fields(text)
	if len(words) < 6 {
		t.Fatalf("reply %q: too short to pick a stop string", text)
	}
	stop := " " + words[4]
	want := text[:strings.Index(text, stop)]
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "stop": [%q, "never-seen"], "stream": %v}`, stop, stream)
		got, reason := "", ""
		if stream {
			resp := ts.post(t, "/v1/chat/completions", body)
			chunks, done := readStream(t, resp.Body)
			resp.Body.Close()
			if !done {
				t.Fatal("stream without [DONE]")
			}
			for _, c := range chunks {
				for _, ch := range c.Choices {
					got += ch.Delta.Content
					if ch.FinishReason != nil {
						reason = *ch.FinishReason
					}
				}
			}
		} else {
			var c completion
			ts.postJSON(t, "/v1/chat/completions", body, &c)
			got, reason = c.Choices[0].Message.Content, *c.Choices[0].FinishReason
		}
		if got != want || reason != "stop" {
			t.Fatalf("stream %v, stop %q: %q (%s), want %q (stop)", stream, stop, got, reason, want)
		}
	}
	if seqs, used := ts.kvClean(t); seqs != 0 || used != 0 {
		t.Fatalf("after stop strings: %d sequences, %d blocks used", seqs, used)
	}
}

// A client that goes away mid-stream frees its sequences' blocks.
func TestClientDisconnectFreesBlocks(t *testing.T) {
	ts := startTestServer(t, 4000)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/v1/completions",
		strings.NewReader(`{"prompt": "`+strings.Repeat("a long prompt ", 20)+`", "max_tokens": 200, "n": 4, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil { // the stream has started
		t.Fatal(err)
	}
	st, err := ts.m.KVStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Groups[0].Used == 0 {
		t.Fatal("no block used while 4 sequences stream")
	}
	cancel()
	resp.Body.Close()
	if seqs, used := ts.kvClean(t); seqs != 0 || used != 0 {
		t.Fatalf("after the client left: %d sequences, %d blocks used", seqs, used)
	}
}

// Bad requests get a 4xx with a message naming the problem, and the
// server goes on serving.
func TestBadRequests(t *testing.T) {
	ts := startTestServer(t, 4000)
	long := strings.Repeat("x", 500)
	for _, c := range []struct {
		name, path, body string
		status           int
		says             string
	}{
		{"malformed JSON", "/v1/completions", `{"prompt": "a"`, 400, "not valid JSON"},
		{"negative max_tokens", "/v1/completions", `{"prompt": "a", "max_tokens": -1}`, 400, "at least 1"},
		{"zero max_tokens", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "max_tokens": 0}`, 400, "at least 1"},
		{"huge n", "/v1/completions", `{"prompt": "a", "n": 100000}`, 400, "n is 100000"},
		{"over-long prompt", "/v1/completions", `{"prompt": "` + long + `", "max_tokens": 20}`, 400, "maximum context length is 512 tokens"},
		{"oversized body", "/v1/completions", `{"prompt": "` + strings.Repeat("y", 2<<20) + `"}`, 413, "larger than 1048576 bytes"},
		{"empty prompt", "/v1/completions", `{"prompt": ""}`, 400, "empty"},
		{"batch of prompts", "/v1/completions", `{"prompt": ["a", "b"]}`, 400, "one request per prompt"},
		{"batch of token-id prompts", "/v1/completions", `{"prompt": [[1, 2], [3]]}`, 400, "one request per prompt"},
		{"token id past the vocabulary", "/v1/completions", `{"prompt": [1, 9999999]}`, 400, "must be in [0, "},
		{"negative token id", "/v1/completions", `{"prompt": [-1]}`, 400, "must be in [0, "},
		{"prompt of another type", "/v1/completions", `{"prompt": {"text": "a"}}`, 400, "token ids"},
		{"unknown model", "/v1/completions", `{"model": "gpt-9", "prompt": "a"}`, 404, "does not exist"},
		{"bad role", "/v1/chat/completions", `{"messages": [{"role": "robot", "content": "a"}]}`, 400, "role"},
		{"no messages", "/v1/chat/completions", `{"messages": []}`, 400, "at least one message"},
		{"bad stop", "/v1/completions", `{"prompt": "a", "stop": 7}`, 400, "stop must be"},
		{"an object after the body", "/v1/completions", `{"prompt":"x","max_tokens":3}{"junk":1}`, 400, "data after its JSON object"},
		{"text after the body", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}]} and more`, 400, "data after its JSON object"},
		{"white space past the size limit", "/v1/completions", `{"prompt": "a"}` + strings.Repeat(" ", 2<<20), 413, "larger than 1048576 bytes"},
	} {
		var got completion
		if code := ts.postJSON(t, c.path, c.body, &got); code != c.status || got.Error == nil || !strings.Contains(got.Error.Message, c.says) {
			t.Errorf("%s: status %d, %+v; want %d saying %q", c.name, code, got.Error, c.status, c.says)
		}
	}
	// A field of the wrong type or out of its range is a 400 whose message
	// and param name the field.
	for _, c := range []struct {
		name, path, body, param, says string
	}{
		{"temperature a string", "/v1/completions", `{"prompt": "a", "temperature": "hot"}`, "temperature", "temperature must be a number"},
		{"temperature past 2", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "temperature": 2.5}`, "temperature", "temperature is 2.5"},
		{"temperature negative", "/v1/completions", `{"prompt": "a", "temperature": -0.1}`, "temperature", "temperature is -0.1"},
		{"top_p a string", "/v1/completions", `{"prompt": "a", "top_p": "most"}`, "top_p", "top_p must be a number"},
		{"top_p past 1", "/v1/completions", `{"prompt": "a", "top_p": 1.01}`, "top_p", "top_p is 1.01"},
		{"max_tokens a string", "/v1/completions", `{"prompt": "a", "max_tokens": "ten"}`, "max_tokens", "max_tokens must be an integer"},
		{"max_tokens a fraction", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "max_tokens": 1.5}`, "max_tokens", "max_tokens must be an integer"},
		{"max_tokens past int64", "/v1/completions", `{"prompt": "a", "max_tokens": 1e30}`, "max_tokens", "max_tokens must be an integer"},
		{"max_tokens at int64's max", "/v1/completions", `{"prompt": "a", "max_tokens": 9223372036854775807}`, "max_tokens", "maximum context length is 512"},
		{"n a string", "/v1/completions", `{"prompt": "a", "n": "two"}`, "n", "n must be an integer"},
		{"n zero", "/v1/completions", `{"prompt": "a", "n": 0}`, "n", "n is 0"},
		{"stop a number", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "stop": 7}`, "stop", "stop must be"},
		{"stop an array of numbers", "/v1/completions", `{"prompt": "a", "stop": [1, 2]}`, "stop", "stop must be"},
		{"stream_options a string", "/v1/completions", `{"prompt": "a", "stream_options": "yes"}`, "stream_options", "stream_options must be an object"},
		{"response_format a string", "/v1/completions", `{"prompt": "a", "response_format": "json"}`, "response_format", "response_format must be an object"},
		{"chat logprobs a number", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "logprobs": 2}`, "logprobs", "logprobs must be true or false"},
		{"best_of below n", "/v1/completions", `{"prompt": "a", "best_of": 1, "n": 2}`, "best_of", "best_of is 1: it must be at least n (2)"},
	} {
		var got completion
		code := ts.postJSON(t, c.path, c.body, &got)
		if code != http.StatusBadRequest || got.Error == nil || got.Error.Param == nil || *got.Error.Param != c.param || !strings.Contains(got.Error.Message, c.says) {
			t.Errorf("%s: status %d, %+v; want 400 with param %q saying %q", c.name, code, got.Error, c.param, c.says)
		}
	}
	var ok completion
	if code := ts.postJSON(t, "/v1/completions", `{"prompt": "still there?", "max_tokens": 2, "temperature": 0.7, "top_p": 0.9}`, &ok); code != 200 || ok.Usage.CompletionTokens != 2 {
		t.Fatalf("after the bad requests: %d, %+v", code, ok)
	}
	// The unsupported fields at their "off" values ask for nothing, and the
	// fields the server ignores stay ignored: served.
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt": "a", "max_tokens": 2, "n": 2, "logprobs": null, "echo": false, "suffix": null, "best_of": 2,
			"response_format": {"type": "text"}, "presence_penalty": 0.5, "frequency_penalty": 0.1, "logit_bias": {"5": 1}, "user": "u"}` + "\n\t "},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "max_tokens": 2, "logprobs": false, "top_logprobs": 0,
			"tools": [], "tool_choice": "none", "functions": null, "function_call": "none", "response_format": {"type": "text"}, "user": "u"}`},
	} {
		var got completion
		if code := ts.postJSON(t, c.path, c.body, &got); code != 200 || got.Usage == nil || got.Usage.CompletionTokens != 2*len(got.Choices) {
			t.Errorf("%s %s: %d, %+v; want 200", c.path, c.body, code, got)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/debug/ledger", "/metrics", "/v1/models"} {
		resp, err := http.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
}

// A prompt of token ids, flat or in an array of one, is served as the text
// whose ids they are (the stand-in tokenizer's ids are the text's bytes).
func TestTokenIDPrompt(t *testing.T) {
	ts := startTestServer(t, 4000)
	text := "The ledger says"
	ids, err := json.Marshal(encode(text))
	if err != nil {
		t.Fatal(err)
	}
	var want completion
	if code := ts.postJSON(t, "/v1/completions", fmt.Sprintf(`{"prompt": %q, "max_tokens": 8, "seed": 3}`, text), &want); code != 200 {
		t.Fatalf("text prompt: status %d", code)
	}
	for _, prompt := range []string{string(ids), "[" + string(ids) + "]"} {
		var got completion
		if code := ts.postJSON(t, "/v1/completions", fmt.Sprintf(`{"prompt": %s, "max_tokens": 8, "seed": 3}`, prompt), &got); code != 200 ||
			got.Choices[0].Text != want.Choices[0].Text || got.Usage.PromptTokens != len(text) {
			t.Fatalf("prompt %s: status %d, %+v; want %q from %d prompt tokens", prompt, code, got, want.Choices[0].Text, len(text))
		}
	}
}

// A field asking for what the server does not do is a 400 in OpenAI's
// error shape, naming the field (param) and saying it is not supported.
func TestUnsupportedFieldsRefused(t *testing.T) {
	ts := startTestServer(t, 4000)
	const chat = `"messages": [{"role": "user", "content": "a"}]`
	for _, c := range []struct {
		name, path, fields, param, says string
	}{
		{"completion logprobs", "/v1/completions", `"prompt": "a", "logprobs": 2`, "logprobs", "logprobs is not supported by this server"},
		{"completion logprobs 0", "/v1/completions", `"prompt": "a", "logprobs": 0`, "logprobs", "logprobs is not supported by this server"},
		{"chat logprobs", "/v1/chat/completions", chat + `, "logprobs": true, "top_logprobs": 3`, "logprobs", "logprobs is not supported by this server"},
		{"chat top_logprobs", "/v1/chat/completions", chat + `, "top_logprobs": 2`, "top_logprobs", "top_logprobs is not supported by this server"},
		{"echo", "/v1/completions", `"prompt": "a", "echo": true`, "echo", "echo is not supported by this server"},
		{"suffix", "/v1/completions", `"prompt": "a", "suffix": " the end"`, "suffix", "suffix is not supported by this server"},
		{"best_of above n", "/v1/completions", `"prompt": "a", "best_of": 3, "n": 2`, "best_of", "best_of above n (best_of 3, n 2) is not supported by this server"},
		{"best_of above the default n", "/v1/completions", `"prompt": "a", "best_of": 2`, "best_of", "best_of above n (best_of 2, n 1) is not supported by this server"},
		{"tools", "/v1/chat/completions", chat + `, "tools": [{"type": "function", "function": {"name": "f"}}]`, "tools", "tools is not supported by this server"},
		{"tool_choice required", "/v1/chat/completions", chat + `, "tool_choice": "required"`, "tool_choice", `tool_choice "required" is not supported by this server`},
		{"tool_choice a function", "/v1/chat/completions", chat + `, "tool_choice": {"type": "function", "function": {"name": "f"}}`, "tool_choice", "is not supported by this server"},
		{"functions", "/v1/chat/completions", chat + `, "functions": [{"name": "f"}]`, "functions", "functions is not supported by this server"},
		{"function_call", "/v1/chat/completions", chat + `, "function_call": "auto"`, "function_call", `function_call "auto" is not supported by this server`},
		{"chat response_format json_object", "/v1/chat/completions", chat + `, "response_format": {"type": "json_object"}`, "response_format", `response_format of type "json_object" is not supported by this server`},
		{"completion response_format json_schema", "/v1/completions", `"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}`, "response_format", `response_format of type "json_schema" is not supported by this server`},
	} {
		for _, stream := range []bool{false, true} {
			resp := ts.post(t, c.path, fmt.Sprintf(`{%s, "max_tokens": 2, "stream": %v}`, c.fields, stream))
			var got struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			err := json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || got.Error == nil ||
				got.Error.Type != "invalid_request_error" || got.Error.Param == nil || *got.Error.Param != c.param || !strings.Contains(got.Error.Message, c.says) {
				t.Errorf("%s (stream %v): %d %s, %+v (%v); want 400 invalid_request_error, param %q, saying %q", c.name, stream, resp.StatusCode, resp.Header.Get("Content-Type"), got.Error, err, c.param, c.says)
			}
		}
	}
	if seqs, used := ts.kvClean(t); seqs != 0 || used != 0 {
		t.Fatalf("after the refusals: %d sequences, %d blocks used", seqs, used)
	}
}

// usage.prompt_tokens counts the prompt once per request, whatever n is,
// streaming or not, on both endpoints, as OpenAI and vLLM count it.
func TestUsageCountsThePromptOnce(t *testing.T) {
	ts := startTestServer(t, 4000)
	for _, c := range []struct{ path, request string }{
		{"/v1/completions", `"prompt": "hello world", "max_tokens": 5`},
		{"/v1/chat/completions", `"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 5`},
	} {
		var one completion
		if code := ts.postJSON(t, c.path, "{"+c.request+"}", &one); code != 200 || one.Usage == nil {
			t.Fatalf("%s n 1: %d, %+v", c.path, code, one)
		}
		if c.path == "/v1/completions" && one.Usage.PromptTokens != len("hello world") {
			t.Fatalf("completion of %q: prompt_tokens %d, want %d", "hello world", one.Usage.PromptTokens, len("hello world"))
		}
		var three completion
		if code := ts.postJSON(t, c.path, "{"+c.request+`, "n": 3}`, &three); code != 200 || three.Usage == nil {
			t.Fatalf("%s n 3: %d, %+v", c.path, code, three)
		}
		want := usage{PromptTokens: one.Usage.PromptTokens, CompletionTokens: 15, TotalTokens: one.Usage.PromptTokens + 15}
		if *three.Usage != want {
			t.Errorf("%s n 3: usage %+v, want %+v (the prompt once, 3 × 5 completion tokens)", c.path, *three.Usage, want)
		}
		resp := ts.post(t, c.path, "{"+c.request+`, "n": 3, "stream": true, "stream_options": {"include_usage": true}}`)
		chunks, done := readStream(t, resp.Body)
		resp.Body.Close()
		if !done || len(chunks) == 0 || chunks[len(chunks)-1].Usage == nil || *chunks[len(chunks)-1].Usage != want {
			t.Errorf("%s n 3 streamed: [DONE] %v, %d chunks, last %+v; want usage %+v", c.path, done, len(chunks), chunks[len(chunks)-1:], want)
		}
	}
}
