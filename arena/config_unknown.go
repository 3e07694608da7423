package arena

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// expertFields are the fields by which Hugging Face configs declare routed
// experts, their count, top-k, width or shared experts. A model_type arena
// does not know that sets any of them (to anything but null, 0, false or
// empty) is refused rather than planned as dense.
var expertFields = []string{
	"n_routed_experts",                    // deepseek_v2/v3, glm4_moe, dots1, nemotron_h
	"num_local_experts",                   // mixtral, gpt_oss, phimoe, granitemoe, minimax, llama4 text
	"num_experts",                         // qwen2_moe, qwen3_moe, olmoe, jamba, bailing_moe, hunyuan
	"moe_num_experts",                     // ernie4_5_moe
	"n_experts",                           // some remote-code MoE configs
	"num_experts_per_tok",                 // the top-k of most of the above
	"experts_per_token",                   // gpt_oss
	"moe_k",                               // ernie4_5_moe
	"moe_topk",                            // hunyuan
	"moe_intermediate_size",               // one expert's width: deepseek, qwen MoE, glm4_moe, ernie
	"n_shared_experts",                    // deepseek, glm4_moe
	"num_shared_experts",                  // bailing_moe
	"moe_num_shared_experts",              // ernie4_5_moe
	"shared_expert_intermediate_size",     // qwen2_moe, qwen3_next
	"moe_shared_expert_intermediate_size", // nemotron_h
}

// unknownFamily is the family of a model_type no family registers (or of
// an absent one): planned as a dense standard decoder (llama's layers),
// unless its config declares routed experts; one whose config nests a
// text_config is read as genericMultimodal.
type unknownFamily struct{ decoder }

// parse plans an unknown model_type as a dense decoder and says so in
// Notes. A config that declares routed experts is refused (ErrUnsupportedMoE):
// as dense it would leave the experts out and seem to fit. A missing
// standard field is an error that says why it was needed. A config that
// nests a text_config is read as genericMultimodal (its language model
// then goes through these rules as text_config's model_type); a flat one
// with a vision_config gets a note that its vision tower is not counted.
func (unknownFamily) parse(r *fieldReader, c *ModelConfig) {
	if r.err != nil { // model_type is not a string
		return
	}
	if r.has("text_config") {
		genericMultimodal.parse(r, c)
		return
	}
	what := fmt.Sprintf("unknown model_type %q", clip(c.ModelType))
	if c.ModelType == "" {
		what = "model_type is absent"
	}
	if seen := declaredExpertFields(r.obj); len(seen) > 0 {
		refuseUnknownMoE(r, c, seen)
		return
	}
	parseDense(r, c)
	if ce, ok := r.err.(*ConfigError); ok {
		ce.Reason += " (" + what + ": planned as dense, which needs hidden_size, " +
			"num_attention_heads, num_hidden_layers, vocab_size and intermediate_size)"
		return
	}
	c.Notes = append(c.Notes, what+": planned as dense")
	if r.has("vision_config") {
		c.Notes = append(c.Notes, "vision_config: the vision tower of an unknown model_type is not counted")
	}
}

// declaredExpertFields lists the expertFields obj sets, as "name = value"
// with the value cut by excerpt, in expertFields order.
func declaredExpertFields(obj map[string]json.RawMessage) []string {
	var seen []string
	for _, name := range expertFields {
		raw := bytes.TrimSpace(obj[name])
		if declaresExperts(raw) {
			seen = append(seen, name+" = "+excerpt(raw))
		}
	}
	return seen
}

// declaresExperts reports whether a field's JSON value is set: not absent,
// null, false, 0, "" or an empty array or object.
func declaresExperts(raw json.RawMessage) bool {
	switch string(raw) {
	case "", "null", "false", `""`, "{}":
		return false
	}
	if arrayLen(raw) == 0 {
		return false
	}
	v, problem := parseInt(raw)
	return problem != "" || v != 0
}

// refuseUnknownMoE records the ErrUnsupportedMoE error on model_type.
func refuseUnknownMoE(r *fieldReader, c *ModelConfig, seen []string) {
	var value any
	is := "is not a model type arena knows"
	if c.ModelType == "" {
		is = "is absent"
	} else {
		value = clip(c.ModelType)
		if _, known := families[c.ModelType]; known {
			is = "is a dense model type in arena"
		}
	}
	r.failWith("model_type", value, fmt.Sprintf("%s, and the config declares routed experts (%s): planned as dense, "+
		"the experts would be left out of the weights, the buffers and the fit, and it would seem to fit; "+
		"arena plans the model types %s: set model_type to one of them only if the model is built like it, "+
		"or add a parser for this model type to arena",
		is, strings.Join(seen, ", "), strings.Join(knownModelTypes(), ", ")), ErrUnsupportedMoE)
}
