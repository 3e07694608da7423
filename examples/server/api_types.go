package main

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The OpenAI API's request and response bodies, as much of them as the
// server serves (https://platform.openai.com/docs/api-reference/completions,
// .../chat). temperature and top_p are checked (type and range) and then
// ignored: the stand-in model does not sample from logits. The fields
// below that ask for what the server does not do (logprobs, echo, suffix,
// best_of above n, tools, a response_format other than text) are read
// only to be refused (unsupported.go). Fields not named here
// (presence_penalty, frequency_penalty, logit_bias, user, …) are ignored.

// completionRequest is POST /v1/completions' body.
type completionRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"` // a string, an array of one string, or token ids (one array of integers)
	MaxTokens *int            `json:"max_tokens"`
	// Refused when set (unsupported.go): logprobs (an integer), echo true,
	// a suffix, best_of other than n.
	Logprobs *int    `json:"logprobs"`
	Echo     bool    `json:"echo"`
	Suffix   *string `json:"suffix"`
	BestOf   *int    `json:"best_of"`
	samplingFields
}

// chatRequest is POST /v1/chat/completions' body.
type chatRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	// Refused when set (unsupported.go): logprobs true, top_logprobs above
	// 0, tools or functions (non-empty), a tool_choice or function_call
	// other than "none".
	Logprobs     bool            `json:"logprobs"`
	TopLogprobs  *int            `json:"top_logprobs"`
	Tools        json.RawMessage `json:"tools"`
	ToolChoice   json.RawMessage `json:"tool_choice"`
	Functions    json.RawMessage `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
	samplingFields
}

// samplingFields are the fields both endpoints share.
type samplingFields struct {
	Stop          json.RawMessage `json:"stop"` // a string or an array of strings
	N             *int            `json:"n"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Stream        bool            `json:"stream"`
	Seed          *int64          `json:"seed"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// ResponseFormat is refused unless its type is "text" (unsupported.go).
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// chatMessage is one message; Content is a string or an array of text
// parts ({"type": "text", "text": ...}), read as their concatenation.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// UnmarshalJSON reads Content as a string or an array of text parts.
func (m *chatMessage) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role = raw.Role
	if len(raw.Content) == 0 || string(raw.Content) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw.Content, &m.Content); err == nil {
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw.Content, &parts); err != nil {
		return errors.New("content: want a string or an array of text parts")
	}
	for _, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content part of type %q: only text is served", p.Type)
		}
		m.Content += p.Text
	}
	return nil
}

// usage is the token counts of a response.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// completionChoice is a choice of a completion (a whole one or a chunk).
type completionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
	Logprobs     *string `json:"logprobs"`
}

// chatChoice is a choice of a chat completion; Message in a whole one,
// Delta in a chunk.
type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatDelta   `json:"delta,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

// chatDelta is a chunk's new text of a choice.
type chatDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

// MarshalJSON writes a message's content as a string.
func (m chatMessage) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{m.Role, m.Content})
}

// response is a completion, a chat completion, or a chunk of either.
type response struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices any    `json:"choices"`
	Usage   *usage `json:"usage,omitempty"`
}

// apiError is the OpenAI API's error body.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

// apiErrorBody says what was wrong: Type "invalid_request_error" for the
// client's mistakes, Param the field.
type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
