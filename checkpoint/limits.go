package checkpoint

// MaxHeaderBytes is the largest header length Open accepts: 100,000,000
// bytes, the MAX_HEADER_SIZE of the safetensors reference reader
// (huggingface/safetensors, safetensors/src/tensor.rs). A larger length is
// ErrHeaderTooLarge, refused before anything is allocated; a length within
// it is also checked against the file's size before its buffer is
// allocated, so a short file never costs more memory than its own size.
const MaxHeaderBytes = 100_000_000

// MaxIndexBytes is the largest model.safetensors.index.json Open reads:
// 100,000,000 bytes (DeepSeek-V3's index, ~91,000 tensors, is ~9 MB). A
// larger index is ErrBadIndex, refused from its size before it is read.
const MaxIndexBytes = 100_000_000

// MaxShards is the most shards an index may name (DeepSeek-V3 has 163).
// The Checkpoint keeps one descriptor open per shard, so the cap also bounds
// its file descriptors. More is ErrBadIndex.
const MaxShards = 10_000

// headerLenBytes is the size of a file's header length: a little-endian
// u64 (the safetensors README, "Format").
const headerLenBytes = 8
