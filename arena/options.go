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
}

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
		MaxBatchTokens: DefaultMaxBatchTokens,
		KVBlockSize:    DefaultKVBlockSize,
		MaxBatchSize:   DefaultMaxBatchSize,
		KMax:           new(int64(DefaultKMax)),
	}
}
