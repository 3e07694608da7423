package arena

import "fmt"

// DType is the element type of a buffer.
type DType uint8

// The element types the buffer table uses.
const (
	BF16 DType = iota + 1 // bfloat16, 2 bytes
	F32                   // IEEE float32, 4 bytes
	FP8                   // float8 e4m3, 1 byte
	U8                    // raw bytes (packed quantized data), 1 byte
	I8                    // int8 quantized activations, 1 byte
	I32                   // int32, 4 bytes
	U32                   // uint32, 4 bytes
)

var dtypeInfo = [...]struct {
	name  string
	bytes int64
}{
	BF16: {"bf16", 2},
	F32:  {"f32", 4},
	FP8:  {"fp8_e4m3", 1},
	U8:   {"u8", 1},
	I8:   {"i8", 1},
	I32:  {"i32", 4},
	U32:  {"u32", 4},
}

// Size is the size of one element in bytes; 0 for an unknown DType.
func (d DType) Size() int64 {
	if int(d) >= len(dtypeInfo) {
		return 0
	}
	return dtypeInfo[d].bytes
}

// String is the lower-case name used in plans and JSON ("bf16", "f32", ...).
func (d DType) String() string {
	if int(d) >= len(dtypeInfo) || dtypeInfo[d].name == "" {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}
