package kvcache

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
)

// TestBlockTablesFillDecodeMeta writes a batch's tables in the layout the
// arena reserves for block_tables and reads them back, as a kernel would.
func TestBlockTablesFillDecodeMeta(t *testing.T) {
	const blockSize, maxSeqLen = 16, 1024
	layout, err := arena.NewDecodeMetaLayout(4, maxSeqLen, blockSize)
	if err != nil {
		t.Fatal(err)
	}
	shape := TableShape{Rows: int(layout.Rows), Width: int(layout.BlockTableWidth)}
	p, err := New(Config{Groups: []GroupConfig{
		{Name: "full", Kind: FullAttention, Blocks: 200, BlockSize: blockSize},
		{Name: "state", Kind: State, Blocks: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(n int) []int32 { return make([]int32, n) }
	r := p.Apply(Step{Admit: []Admit{{Seq: 7, Tokens: prompt(100)}, {Seq: 3, Tokens: prompt(maxSeqLen)}}})
	if len(r.Errors) != 0 {
		t.Fatal(r.Errors)
	}
	batch := []SeqID{3, 7}
	buf := make([]byte, layout.BlockTables.Bytes)
	if err := p.EncodeBlockTables(buf, shape, 0, batch); err != nil {
		t.Fatal(err)
	}
	ints := make([]int32, shape.Rows*shape.Width)
	if err := p.WriteBlockTables(ints, shape, 0, batch); err != nil {
		t.Fatal(err)
	}
	for i, v := range ints {
		if got := int32(binary.LittleEndian.Uint32(buf[i*4:])); got != v {
			t.Fatalf("entry %d: bytes say %d, ints %d", i, got, v)
		}
	}
	for row, id := range batch {
		tables, _ := p.BlockTable(id)
		got := ints[row*shape.Width : (row+1)*shape.Width]
		want := append(slices.Clone(tables[0]), make([]int32, shape.Width-len(tables[0]))...)
		if !slices.Equal(got, want) {
			t.Errorf("row %d: %v, want %v padded with the null block", row, got, want)
		}
	}
	for _, v := range ints[len(batch)*shape.Width:] {
		if v != NullBlock {
			t.Fatalf("a padding row holds %d", v)
		}
	}
	if err := p.WriteBlockTables(ints, shape, 1, batch); err != nil || ints[0] != 1 || ints[1] != StatePad || ints[shape.Width] != 0 {
		t.Errorf("state rows: %v, %v", ints[:2], err)
	}
	for i := range buf {
		buf[i] = 0x5a // every byte must be written
	}
	if err := p.EncodeBlockTables(buf, shape, 1, batch); err != nil {
		t.Fatal(err)
	}
	for i, v := range ints {
		if got := int32(binary.LittleEndian.Uint32(buf[i*4:])); got != v {
			t.Fatalf("state entry %d: bytes say %d, ints %d", i, got, v)
		}
	}
	for name, call := range map[string]func() error{
		"short ints":  func() error { return p.WriteBlockTables(ints[:len(ints)-1], shape, 0, batch) },
		"short bytes": func() error { return p.EncodeBlockTables(buf[:len(buf)-1], shape, 0, batch) },
		"bad group":   func() error { return p.WriteBlockTables(ints, shape, 2, batch) },
		"no rows":     func() error { return p.WriteBlockTables(ints, TableShape{Width: 4}, 0, nil) },
	} {
		var te *TableError
		if err := call(); !errors.Is(err, ErrTableLayout) || !errors.As(err, &te) {
			t.Errorf("%s: %v, want a *TableError", name, err)
		}
	}
	if _, err := p.BlockTable(99); !errors.Is(err, ErrUnknownSequence) {
		t.Errorf("BlockTable(99): %v", err)
	}
}
