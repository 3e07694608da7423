package arena

// Options are the serving options that size the arena. The zero value of a
// field means "use the default", except KMax, whose 0 is a value of its own
// and which is therefore a pointer: nil is unset. DefaultOptions returns the
// defaults spelled out. Options holds a pointer, so compare two with their
// fields, not ==.
type Options struct {
	// MaxBatchTokens (max_batch_tokens, M) is the most tokens one forward step
	// processes, prefill and decode together. Default 8192.
	MaxBatchTokens int64
	// MaxSeqLen (max_seq_len) is the longest sequence served, in tokens.
	// Default min(max_position_embeddings, 32768).
	MaxSeqLen int64
	// KVBlockSize (kv_block_size) is the tokens per paged KV-cache block. Default 16.
	KVBlockSize int64
	// MaxBatchSize (max_batch_size) is the most sequences in one decode step.
	// Default min(256, MaxBatchTokens).
	MaxBatchSize int64
	// KMax (k_max) is the number of speculative tokens verified per step,
	// ≥ 0: nil means DefaultKMax (3), a set 0 means no speculative decoding
	// (KMax: new(int64(0))). Resolve returns it set, never nil, pointing to
	// a copy of its own.
	KMax *int64
	// LoRAMaxRank (lora_max_rank) is the largest LoRA adapter rank; 0 means no LoRA scratch.
	LoRAMaxRank int64
	// FP8Rowwise turns on FP8 row-wise GDN weights, which need the row-wise slab.
	FP8Rowwise bool
	// Q2Prefill turns on the native Q2 prefill path and its scratch buffers.
	Q2Prefill bool
	// LogitsRows (logits_rows) is which rows the logits buffer holds:
	// LogitsAll ("", the default) one per token of the step, [M, vocab];
	// LogitsSampled only the positions sampled from, [min(M,
	// max_batch_size·(1 + k_max)), vocab], as vLLM and SGLang compute them.
	LogitsRows LogitsRows
	// KVCacheDType (kv_cache_dtype) is the KV cache's element type; ""
	// means KVCacheAuto, the model dtype. Resolve returns it parsed
	// (ParseKVCacheDType), so "bf16" comes back as "bfloat16".
	KVCacheDType KVCacheDType
	// MambaSSMCacheDType (mamba_ssm_cache_dtype) is the recurrent state's
	// element type of GDN and Mamba-2 layers; "" means SSMCacheAuto, which
	// vLLM resolves per model (see NewKVLayoutFor). Resolve returns it
	// parsed (ParseSSMCacheDType).
	MambaSSMCacheDType SSMCacheDType
	// AllowLongMaxSeqLen (allow_long_max_seq_len) accepts a MaxSeqLen above
	// the model's limit (ModelConfig.MaxSeqLenLimit), as vLLM's
	// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 does; without it such a MaxSeqLen is
	// a *MaxSeqLenError.
	AllowLongMaxSeqLen bool
}

// LogitsRows is logits_rows: which token positions the logits buffer holds.
type LogitsRows string

// The logits_rows values; "" is LogitsAll.
const (
	// LogitsAll: a row per token of the step, [max_batch_tokens, vocab]
	// (every position's logits, as a prefill that returns prompt logprobs
	// needs).
	LogitsAll LogitsRows = "all"
	// LogitsSampled: a row per sampled position only, at most
	// max_batch_size·(1 + k_max) (each sequence's last token and its k_max
	// speculative tokens), and never more than max_batch_tokens (vLLM
	// gpu_model_runner: logits are computed for logits_indices, the sampled
	// positions).
	LogitsSampled LogitsRows = "sampled"
)

// Upper bounds of the options, past which a value is an *OptionError
// naming the accepted range.
const (
	// MaxKVBlockSize is the largest kv_block_size. vLLM takes 1 to 256
	// tokens from the user (vllm/config/cache.py BlockSize) and raises the
	// attention block of hybrid models past that to match a Mamba page
	// (vllm/model_executor/models/config.py
	// HybridAttentionMambaModelConfig: 528, 544 tokens); 2048 holds both.
	MaxKVBlockSize = 2048
	// MaxLoRAMaxRank is the largest lora_max_rank, vLLM's largest
	// max_lora_rank (vllm/config/lora.py MaxLoRARanks: 1 … 512).
	MaxLoRAMaxRank = 512
	// MaxKMax is the largest k_max. vLLM bounds num_speculative_tokens by
	// no constant; draft and n-gram methods verify at most a few dozen
	// tokens per step, and k_max multiplies the expert and sampled-logits
	// rows.
	MaxKMax = 64
)

// Defaults of Options, as documented on each field.
const (
	DefaultMaxBatchTokens = 8192
	DefaultMaxSeqLenCap   = 32768
	DefaultKVBlockSize    = 16
	DefaultMaxBatchSize   = 256
	DefaultKMax           = 3
)

// DefaultOptions returns the default serving options. MaxSeqLen is left 0:
// it depends on the model and is resolved by PlanFor.
func DefaultOptions() Options {
	return Options{
		MaxBatchTokens:     DefaultMaxBatchTokens,
		KVBlockSize:        DefaultKVBlockSize,
		MaxBatchSize:       DefaultMaxBatchSize,
		KMax:               new(int64(DefaultKMax)),
		LogitsRows:         LogitsAll,
		KVCacheDType:       KVCacheAuto,
		MambaSSMCacheDType: SSMCacheAuto,
	}
}
