package main

import (
	"encoding/json"
	"fmt"
)

// The request fields the server reads only to refuse them: each asks for
// something it does not do (log probabilities, the prompt echoed, a suffix,
// the best of several samples, tool calls, constrained output), and
// answering without it would be answering another request. Each is a 400
// naming the field, as vLLM refuses what it does not implement
// (serving_completion.py create_completion refuses a suffix with a 400).
// A field at its "off" value (null, false, top_logprobs 0, [], "none",
// best_of equal to n, response_format of type text) asks for nothing and
// is served.

// notSupported is the 400 for param, which asks for what (param, or
// param with its value) that this server does not do; why says what it
// does instead, fix what to send.
func notSupported(param, what, why, fix string) *requestError {
	return badRequest(param, "%s is not supported by this server (%s): %s", what, why, fix)
}

// What to send instead of a refused field.
const (
	leaveOut     = "leave it out"
	leaveOutNone = `leave it out or "none"`
)

// Why a field is refused.
const (
	noLogprobs = "the stand-in model computes no log probabilities"
	noTools    = "it calls no tools"
)

// unsupportedCompletion refuses the fields of a completion request the
// server does not implement; n is the request's checked n.
func unsupportedCompletion(req *completionRequest, n int) *requestError {
	switch {
	case req.Logprobs != nil:
		return notSupported("logprobs", "logprobs", noLogprobs, leaveOut)
	case req.Echo:
		return notSupported("echo", "echo", "a completion holds the generated text only", "leave it out or false")
	case req.Suffix != nil && *req.Suffix != "":
		return notSupported("suffix", "suffix", "the model only continues the prompt", leaveOut)
	case req.BestOf != nil && *req.BestOf < n:
		return badRequest("best_of", "best_of is %d: it must be at least n (%d)", *req.BestOf, n)
	case req.BestOf != nil && *req.BestOf > n:
		return notSupported("best_of", fmt.Sprintf("best_of above n (best_of %d, n %d)", *req.BestOf, n), "every sample generated is returned; none is picked", "leave best_of out or equal to n")
	}
	return unsupportedFormat(&req.samplingFields)
}

// unsupportedChat refuses the fields of a chat request the server does not
// implement.
func unsupportedChat(req *chatRequest) *requestError {
	switch {
	case req.Logprobs:
		return notSupported("logprobs", "logprobs", noLogprobs, leaveOut)
	case req.TopLogprobs != nil && *req.TopLogprobs > 0:
		return notSupported("top_logprobs", "top_logprobs", noLogprobs, leaveOut)
	case !emptyList(req.Tools):
		return notSupported("tools", "tools", noTools, leaveOut)
	case !noneChoice(req.ToolChoice):
		return notSupported("tool_choice", "tool_choice "+string(req.ToolChoice), noTools, leaveOutNone)
	case !emptyList(req.Functions):
		return notSupported("functions", "functions", noTools, leaveOut)
	case !noneChoice(req.FunctionCall):
		return notSupported("function_call", "function_call "+string(req.FunctionCall), noTools, leaveOutNone)
	}
	return unsupportedFormat(&req.samplingFields)
}

// unsupportedFormat refuses a response_format other than text.
func unsupportedFormat(f *samplingFields) *requestError {
	if rf := f.ResponseFormat; rf != nil && rf.Type != "text" {
		return notSupported("response_format", fmt.Sprintf("response_format of type %q", rf.Type), "the output is not constrained", `leave it out or use {"type": "text"}`)
	}
	return nil
}

// emptyList reports whether raw is absent, null or an empty array.
func emptyList(raw json.RawMessage) bool {
	var list []json.RawMessage
	return len(raw) == 0 || json.Unmarshal(raw, &list) == nil && len(list) == 0
}

// noneChoice reports whether raw is absent, null or "none".
func noneChoice(raw json.RawMessage) bool {
	var s string
	return len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &s) == nil && s == "none"
}
