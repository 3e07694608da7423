package arena

import (
	"errors"
	"testing"
)

func TestDecodeMetaLayoutSameForSmallBatches(t *testing.T) {
	fixed, err := NewDecodeMetaLayout(32, 32768, 16)
	if err != nil {
		t.Fatal(err)
	}
	// 32 rows, ⌈32768/16⌉ = 2048 blocks: positions 32·4 = 128 B @0, slot_mapping
	// 128 B @256, block_tables 32·2048·4 = 262144 B @512 → 262656 B.
	want := DecodeMetaLayout{
		Rows: 32, BlockTableWidth: 2048,
		Positions:   MetaField{Offset: 0, Bytes: 128},
		SlotMapping: MetaField{Offset: 256, Bytes: 128},
		BlockTables: MetaField{Offset: 512, Bytes: 262144},
		Bytes:       262656,
	}
	if fixed != want {
		t.Fatalf("32-row layout %+v, want %+v", fixed, want)
	}
	for b := int64(1); b <= 32; b++ {
		l, err := NewDecodeMetaLayout(b, 32768, 16)
		if err != nil || l != fixed {
			t.Errorf("batch %d: %+v, %v; want the 32-row layout", b, l, err)
		}
	}
	if l, _ := NewDecodeMetaLayout(33, 32768, 16); l.Rows != 33 || l == fixed {
		t.Errorf("batch 33: %+v, want 33 rows", l)
	}
}

func TestDecodeMetaLayoutDefault(t *testing.T) {
	l, err := NewDecodeMetaLayout(256, 32768, 16)
	if err != nil {
		t.Fatal(err)
	}
	// positions 256·4 = 1024 @0, slot_mapping 1024 @1024, block_tables
	// 256·2048·4 = 2097152 @2048 → 2099200 B.
	want := DecodeMetaLayout{
		Rows: 256, BlockTableWidth: 2048,
		Positions:   MetaField{Offset: 0, Bytes: 1024},
		SlotMapping: MetaField{Offset: 1024, Bytes: 1024},
		BlockTables: MetaField{Offset: 2048, Bytes: 2097152},
		Bytes:       2099200,
	}
	if l != want {
		t.Errorf("%+v, want %+v", l, want)
	}
	// An odd width rounds the total up to the alignment: 33 rows, ⌈100/16⌉ = 7:
	// 132 @0, 132 @256, 33·7·4 = 924 @512 → 1436 → 1536.
	l, err = NewDecodeMetaLayout(33, 100, 16)
	if err != nil || l.BlockTables != (MetaField{512, 924}) || l.Bytes != 1536 {
		t.Errorf("33×7 layout %+v, %v", l, err)
	}
}

func TestDecodeMetaLayoutErrors(t *testing.T) {
	tests := []struct {
		batch, seq, block int64
		option            string
	}{
		{0, 32768, 16, "max_batch_size"},
		{MaxDecodeRows + 1, 32768, 16, "max_batch_size"},
		{8, -1, 16, "max_seq_len"},
		{8, 32768, 0, "kv_block_size"},
	}
	for _, tt := range tests {
		_, err := NewDecodeMetaLayout(tt.batch, tt.seq, tt.block)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Option != tt.option || !errors.Is(err, ErrInvalidOption) {
			t.Errorf("NewDecodeMetaLayout(%d, %d, %d) err = %v, want option %s", tt.batch, tt.seq, tt.block, err, tt.option)
		}
	}
	if _, err := NewDecodeMetaLayout(MaxDecodeRows, 1<<62, 1); !errors.Is(err, ErrOverflow) {
		t.Errorf("huge max_seq_len err = %v, want ErrOverflow", err)
	}
}
