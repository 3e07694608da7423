package main

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The official OpenAI Go client speaks to the server: completions and
// chat, streaming and not, with n, stop, max_tokens and usage.
func TestOpenAIClient(t *testing.T) {
	ts := startTestServer(t, 4000)
	client := openai.NewClient(option.WithBaseURL(ts.url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()

	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "qwen3-0.6b" {
		t.Fatalf("models: %+v, %v", models, err)
	}
	c, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(ts.name),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(10), N: openai.Int(2), Seed: openai.Int(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 2 || c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 20 || c.Usage.PromptTokens != int64(len("Once upon a time")) {
		t.Fatalf("completion: %+v", c)
	}
	stream := client.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(ts.name),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(10), N: openai.Int(2), Seed: openai.Int(1),
	})
	texts := map[int64]string{}
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			texts[ch.Index] += ch.Text
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if texts[0] != c.Choices[0].Text || texts[1] != c.Choices[1].Text {
		t.Fatalf("streamed %v, not streamed %q, %q", texts, c.Choices[0].Text, c.Choices[1].Text)
	}

	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     ts.name,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")},
		MaxTokens: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	reply := chat.Choices[0].Message.Content
	if reply == "" || chat.Choices[0].Message.Role != "assistant" || chat.Usage.CompletionTokens != 8 {
		t.Fatalf("chat: %+v", chat)
	}
	cs := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:     ts.name,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")},
		MaxTokens: openai.Int(8), StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != reply || acc.Usage.CompletionTokens != 8 || acc.Choices[0].FinishReason != "length" {
		t.Fatalf("chat stream: %q (%s, %+v), not streamed %q", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, acc.Usage, reply)
	}
	_, err = client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(ts.name),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")},
		MaxTokens: openai.Int(5000),
	})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("max_tokens 5000: %v, want a 400", err)
	}
}
