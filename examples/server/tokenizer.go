package main

import "strings"

// The server's tokenizer is a stand-in, like its model (model.go): a
// prompt's token ids are its UTF-8 bytes (ids 0–255), and the model's
// outputs are ids from wordBase on, each one word of words. A team
// replaces it with the model's own tokenizer (its tokenizer.json), keeping
// encode and decode's signatures.
const wordBase = 256

// words are the output vocabulary's pieces: id wordBase + i is words[i].
var words = []string{
	" the", " arena", " holds", " every", " buffer", " of", " one", " forward", " step", " and",
	" a", " block", " pool", " serves", " each", " sequence", " while", " its", " ledger", " counts",
	" bytes", " on", " device", " until", " release", " frees", " them", " all", ".", ",",
	" prefix", " cache", " hits", " save", " prefill", " decode", " tokens", " flow", " through", " kernels",
	" weights", " load", " fast", " from", " disk", " into", " memory", " that", " never", " leaks",
}

// encode is text's token ids: its bytes.
func encode(text string) []int32 {
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i])
	}
	return ids
}

// decode is the text of ids: bytes for ids below wordBase (so decode
// inverts encode), words from wordBase on.
func decode(ids ...int32) string {
	var b strings.Builder
	for _, id := range ids {
		switch {
		case id < 0:
		case id < wordBase:
			b.WriteByte(byte(id))
		default:
			b.WriteString(words[int(id-wordBase)%len(words)])
		}
	}
	return b.String()
}

// chatPrompt is the stand-in chat template: each message as
// "<|role|>\ncontent\n", then "<|assistant|>\n" to prompt the reply.
func chatPrompt(msgs []chatMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|" + m.Role + "|>\n" + m.Content + "\n")
	}
	b.WriteString("<|assistant|>\n")
	return b.String()
}
