package arena

// mixtral: Mixtral (modeling_mixtral.py MixtralSparseMoeBlock): the standard
// decoder with num_local_experts routed SwiGLU experts of intermediate_size
// in every layer.
type mixtral struct{ decoder }

func init() { registerFamily(mixtral{}, "mixtral") }

// parse reads a standard MoE decoder (num_local_experts).
func (mixtral) parse(r *fieldReader, c *ModelConfig) { parseMoE(r, c, "num_local_experts", nil) }
