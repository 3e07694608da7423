package arena

// llama: Llama and Mistral (modeling_llama.py, modeling_mistral.py): the
// standard decoder with a dense SwiGLU MLP of intermediate_size in every
// layer and no attention biases.
type llama struct{ decoder }

func init() { registerFamily(llama{}, "llama", "mistral") }

// parse reads a standard dense decoder (parseDense). A config that also
// declares routed experts (a Mixtral-like model under model_type llama) is
// refused with ErrUnsupportedMoE: as dense it would seem to fit.
func (llama) parse(r *fieldReader, c *ModelConfig) {
	if seen := declaredExpertFields(r.obj); len(seen) > 0 {
		refuseUnknownMoE(r, c, seen)
		return
	}
	parseDense(r, c)
}
