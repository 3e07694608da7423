// Package arena sizes the memory of an LLM inference server before anything
// touches a device. It is pure computation: no goroutines, no actors, no GPU.
//
//   - ParseConfig / LoadConfig read a Hugging Face config.json into a
//     ModelConfig for every model_type a family registers, and plan an
//     unknown model_type with the standard dense fields as dense (one with
//     routed-expert fields is refused: ErrUnsupportedMoE, whose message
//     lists the registered model_types). Each family is one file,
//     family_<name>.go: its model_type names, how its config is read, its
//     attention kind (widths, KV bytes per token) and recurrent dims, and
//     its weight tensors; the planner, the KV layout and the weight
//     estimate read that spec (family_spec.go) and dispatch on nothing else.
//     A multimodal config (Gemma-3, Qwen2.5-VL, LLaVA, Mistral-3, or any
//     model_type whose config nests a text_config) is planned as its
//     language model (TextModelType); its vision tower (VisionConfig) only
//     adds weights.
//     Input is bounded before it is decoded (MaxConfigBytes, MaxLayers,
//     MaxArchitectures, MaxArrayEntries: ErrConfigTooLarge); LoadConfig
//     takes a file or a model folder and refuses FIFOs, devices and sockets
//     (ErrNotRegularFile).
//   - PlanFor sizes every intermediate buffer of one forward step (the buffer
//     table: one rule per BufferID, in rules.go, each with the source of its
//     formula) for the serving Options (max_batch_tokens, max_seq_len,
//     kv_block_size, max_batch_size, k_max, lora_max_rank, fp8_rowwise).
//   - NewPoolLayout places a plan's buffers in one allocation;
//     NewDecodeMetaLayout lays out the decode metadata; CarveSlab is the slab
//     carve arithmetic.
//   - EstimateWeights sizes the weights tensor by tensor, as the engine
//     holds them (vLLM's padded MXFP4 experts, MXFP4Backend) and as the
//     checkpoint stores them; CheckpointTensors lists them under their
//     checkpoint names; NewKVLayout the KV
//     cache and per-sequence state; Fit prices all of it against a device and
//     gpu_memory_utilization, and says what would make a plan fit.
//
// Every size is in bytes and computed with overflow checks; bad input gives a
// *ConfigError or *OptionError naming the field, never a panic.
package arena
