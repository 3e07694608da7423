package kvcache

import (
	"encoding/binary"
	"fmt"
)

// NullBlock is block 0 of every paged group: never handed out, it stands
// for a sliding-window block given back and pads every paged row of a
// block table, as vLLM's null block (BlockPool.null_block, block_id 0). A
// kernel may read it; nothing of any sequence is in it.
const NullBlock int32 = 0

// StatePad pads a state group's rows: a state slot is written in place,
// so a padded row must name none (vLLM's PAD_SLOT_ID, −1, which its
// Mamba kernels skip).
const StatePad int32 = -1

// BlockTable returns a sequence's block table in each group, in
// Config.Groups order: a paged group's block ids by position (block i
// holds tokens i·kv_block_size …; NullBlock where a sliding window gave a
// block back), a state group's one slot. The slices are the caller's.
// Errors: a *SequenceError (ErrUnknownSequence).
func (p *Pool) BlockTable(id SeqID) ([][]int32, error) {
	s := p.seqs[id]
	if s == nil {
		return nil, &SequenceError{Op: OpTable, Seq: id, Err: ErrUnknownSequence}
	}
	t := make([][]int32, len(s.tables))
	for i, row := range s.tables {
		t[i] = append([]int32(nil), row...)
	}
	return t, nil
}

// TableShape is the block_tables field of the arena's decode metadata
// (arena.DecodeMetaLayout): Rows = its Rows (max(32, max_batch_size)),
// Width = its BlockTableWidth (⌈max_seq_len / kv_block_size⌉); the field
// is [Rows, Width] int32, row-major, Rows·Width·4 bytes.
type TableShape struct {
	// Rows is the rows (sequences), Width the entries per row (blocks).
	Rows, Width int
}

// WriteBlockTables writes group's block tables of a batch into dst in
// the [Rows, Width] int32 layout of shape: row r is batch[r]'s table,
// padded to Width with NullBlock (paged groups) or StatePad (state
// groups); rows from len(batch) on are all padding. It writes exactly
// Rows·Width entries, at the start of dst. Errors: a *TableError
// (ErrTableLayout) for an unknown group, a batch of more than Rows
// sequences, a table longer than Width, a dst shorter than Rows·Width or
// a shape under 1×1; with ErrUnknownSequence for an unknown sequence. On
// error nothing is written.
func (p *Pool) WriteBlockTables(dst []int32, shape TableShape, group int, batch []SeqID) error {
	pad, err := p.checkTables(len(dst), shape, group, batch)
	if err != nil {
		return err
	}
	for r := range shape.Rows {
		row := dst[r*shape.Width : (r+1)*shape.Width]
		n := 0
		if r < len(batch) {
			n = copy(row, p.seqs[batch[r]].tables[group])
		}
		for i := n; i < len(row); i++ {
			row[i] = pad
		}
	}
	return nil
}

// EncodeBlockTables is WriteBlockTables into bytes, each entry a
// little-endian int32 (the device's byte order): dst must hold
// Rows·Width·4 bytes, the size of the arena's block_tables field, and is
// what a step copies into the scratch buffer at block_tables' offset.
// Errors: those of WriteBlockTables.
func (p *Pool) EncodeBlockTables(dst []byte, shape TableShape, group int, batch []SeqID) error {
	pad, err := p.checkTables(len(dst)/4, shape, group, batch)
	if err != nil {
		return err
	}
	for r := range shape.Rows {
		row := dst[r*shape.Width*4 : (r+1)*shape.Width*4]
		n := 0
		if r < len(batch) {
			t := p.seqs[batch[r]].tables[group]
			for i, v := range t {
				binary.LittleEndian.PutUint32(row[i*4:], uint32(v))
			}
			n = len(t)
		}
		fillPad(row[n*4:], pad)
	}
	return nil
}

// fillPad fills b (a whole number of entries) with pad, little-endian:
// a memclr for NullBlock, doubling copies otherwise.
func fillPad(b []byte, pad int32) {
	if pad == 0 {
		clear(b)
		return
	}
	if len(b) == 0 {
		return
	}
	binary.LittleEndian.PutUint32(b, uint32(pad))
	for k := 4; k < len(b); k *= 2 {
		copy(b[k:], b[:k])
	}
}

// checkTables validates a batch against a layout of room entries and
// returns the group's padding value.
func (p *Pool) checkTables(room int, shape TableShape, group int, batch []SeqID) (int32, error) {
	layout := func(format string, args ...any) error {
		return &TableError{Group: group, Row: -1, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case group < 0 || group >= len(p.groups):
		return 0, layout("no such group: the pool has %d", len(p.groups))
	case shape.Rows < 1 || shape.Width < 1:
		return 0, layout("shape %d×%d: rows and width must be at least 1", shape.Rows, shape.Width)
	case len(batch) > shape.Rows:
		return 0, layout("%d sequences, %d rows: raise max_batch_size or split the batch", len(batch), shape.Rows)
	case shape.Rows > room/shape.Width:
		return 0, layout("shape %d×%d needs %d entries, dst holds %d", shape.Rows, shape.Width, shape.Rows*shape.Width, room)
	}
	for r, id := range batch {
		s := p.seqs[id]
		if s == nil {
			return 0, &TableError{Group: group, Row: r, Seq: id, Reason: "not in the pool", Err: ErrUnknownSequence}
		}
		if n := len(s.tables[group]); n > shape.Width {
			return 0, &TableError{Group: group, Row: r, Seq: id,
				Reason: fmt.Sprintf("%d blocks, rows hold %d: raise max_seq_len (the width is ⌈max_seq_len / kv_block_size⌉)", n, shape.Width)}
		}
	}
	if p.groups[group].cfg.Kind.paged() {
		return NullBlock, nil
	}
	return StatePad, nil
}
