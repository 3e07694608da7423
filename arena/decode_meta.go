package arena

import "fmt"

// Decode metadata limits (design.md §5 "Decode metadata").
const (
	// MinDecodeRows is the fewest rows the decode metadata has: every batch
	// of 1..32 sequences uses the same 32-row layout, so a kernel launched
	// for a small batch never sees a different layout.
	MinDecodeRows = 32
	// MaxDecodeRows is the most rows (max_batch_size) the decode metadata
	// holds; a larger max_batch_size is an error.
	MaxDecodeRows = 4096
	// DecodeMetaAlign is the byte alignment of each metadata field inside
	// scratch (the CUDA allocation granularity for coalesced loads).
	DecodeMetaAlign = 256
)

// MetaField is one field of the decode metadata inside the scratch buffer.
type MetaField struct {
	// Offset from the start of scratch, in bytes; a multiple of DecodeMetaAlign.
	Offset int64
	// Bytes is the field's length in bytes.
	Bytes int64
}

// DecodeMetaLayout is where the decode-step kernel metadata lives inside the
// scratch buffer: positions [Rows] i32, slot_mapping [Rows] i32 (paged-KV slot
// = block × kv_block_size + offset, as vLLM's slot_mapping) and block_tables
// [Rows, BlockTableWidth] i32, each DecodeMetaAlign-aligned.
type DecodeMetaLayout struct {
	// Rows is max(MinDecodeRows, max_batch_size) sequences.
	Rows int64
	// BlockTableWidth is ⌈max_seq_len / kv_block_size⌉ KV blocks per sequence.
	BlockTableWidth int64
	// Positions is [Rows] i32: each sequence's token position.
	Positions MetaField
	// SlotMapping is [Rows] i32: each new token's KV-cache slot.
	SlotMapping MetaField
	// BlockTables is [Rows, BlockTableWidth] i32: each sequence's KV block ids.
	BlockTables MetaField
	// Bytes is the whole layout, rounded up to DecodeMetaAlign; it is the
	// size of the scratch buffer.
	Bytes int64
}

// NewDecodeMetaLayout lays out the decode metadata for up to maxBatchSize
// sequences of up to maxSeqLen tokens in kvBlockSize-token KV blocks. For
// every maxBatchSize ≤ MinDecodeRows the layout is identical. Errors: an
// *OptionError (max_batch_size, max_seq_len, kv_block_size) for a value ≤ 0
// or a max_batch_size over MaxDecodeRows; an *OverflowError.
func NewDecodeMetaLayout(maxBatchSize, maxSeqLen, kvBlockSize int64) (DecodeMetaLayout, error) {
	for _, o := range []struct {
		name string
		v    int64
	}{{"max_batch_size", maxBatchSize}, {"max_seq_len", maxSeqLen}, {"kv_block_size", kvBlockSize}} {
		if o.v <= 0 {
			return DecodeMetaLayout{}, &OptionError{Option: o.name, Value: o.v, Reason: "must be positive"}
		}
	}
	if maxBatchSize > MaxDecodeRows {
		return DecodeMetaLayout{}, &OptionError{Option: "max_batch_size", Value: maxBatchSize,
			Reason: fmt.Sprintf("exceeds the decode metadata maximum of %d rows", MaxDecodeRows)}
	}
	l := DecodeMetaLayout{Rows: max(MinDecodeRows, maxBatchSize), BlockTableWidth: ceilDiv(maxSeqLen, kvBlockSize)}
	i32 := I32.Size()
	var err error
	end := int64(0)
	place := func(f *MetaField, what string, elems ...int64) {
		if err != nil {
			return
		}
		if f.Offset, err = alignUp(what, end, DecodeMetaAlign); err != nil {
			return
		}
		if f.Bytes, err = CheckedProduct(what, append(elems, i32)...); err != nil {
			return
		}
		end, err = CheckedAdd(what, f.Offset, f.Bytes)
	}
	place(&l.Positions, "decode positions", l.Rows)
	place(&l.SlotMapping, "decode slot_mapping", l.Rows)
	place(&l.BlockTables, "decode block_tables", l.Rows, l.BlockTableWidth)
	if err == nil {
		l.Bytes, err = alignUp("decode metadata", end, DecodeMetaAlign)
	}
	if err != nil {
		return DecodeMetaLayout{}, err
	}
	return l, nil
}
