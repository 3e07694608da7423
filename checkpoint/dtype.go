package checkpoint

import "strconv"

// DType is the element type of a tensor, as a safetensors header spells it
// in its "dtype" field. The set is the Dtype enum of huggingface/safetensors
// (safetensors/src/tensor.rs, 2026-05): every dtype that reference reader
// accepts, the sub-byte MX types included, is known here, so a checkpoint
// the reference accepts is never refused for its dtypes.
type DType uint8

// The dtypes of the safetensors format. Each comment gives the header's
// spelling and the size of one element. F4 (4 bits) and the F6 types
// (6 bits) are packed: a tensor of them must fill whole bytes.
const (
	Bool       DType = iota + 1 // "BOOL", 1 byte (0 or 1)
	F4                          // "F4", MXFP4 E2M1, 4 bits
	F6E2M3                      // "F6_E2M3", MXFP6, 6 bits
	F6E3M2                      // "F6_E3M2", MXFP6, 6 bits
	U8                          // "U8", 1 byte
	I8                          // "I8", 1 byte
	F8E5M2                      // "F8_E5M2", 1 byte
	F8E4M3                      // "F8_E4M3", 1 byte (the FP8 of DeepSeek-V3 weights)
	F8E8M0                      // "F8_E8M0", MX scale, 1 byte
	F8E4M3FNUZ                  // "F8_E4M3FNUZ", 1 byte
	F8E5M2FNUZ                  // "F8_E5M2FNUZ", 1 byte
	I16                         // "I16", 2 bytes
	U16                         // "U16", 2 bytes
	F16                         // "F16", IEEE half, 2 bytes
	BF16                        // "BF16", bfloat16, 2 bytes
	I32                         // "I32", 4 bytes
	U32                         // "U32", 4 bytes
	F32                         // "F32", IEEE single, 4 bytes
	C64                         // "C64", complex of two F32, 8 bytes
	F64                         // "F64", IEEE double, 8 bytes
	I64                         // "I64", 8 bytes
	U64                         // "U64", 8 bytes
)

// dtypeInfo is indexed by DType; the zero entry is the invalid DType.
var dtypeInfo = [...]struct {
	name string
	bits int64
}{
	Bool:       {"BOOL", 8},
	F4:         {"F4", 4},
	F6E2M3:     {"F6_E2M3", 6},
	F6E3M2:     {"F6_E3M2", 6},
	U8:         {"U8", 8},
	I8:         {"I8", 8},
	F8E5M2:     {"F8_E5M2", 8},
	F8E4M3:     {"F8_E4M3", 8},
	F8E8M0:     {"F8_E8M0", 8},
	F8E4M3FNUZ: {"F8_E4M3FNUZ", 8},
	F8E5M2FNUZ: {"F8_E5M2FNUZ", 8},
	I16:        {"I16", 16},
	U16:        {"U16", 16},
	F16:        {"F16", 16},
	BF16:       {"BF16", 16},
	I32:        {"I32", 32},
	U32:        {"U32", 32},
	F32:        {"F32", 32},
	C64:        {"C64", 64},
	F64:        {"F64", 64},
	I64:        {"I64", 64},
	U64:        {"U64", 64},
}

// dtypeByName maps a header's spelling to its DType.
var dtypeByName = func() map[string]DType {
	m := make(map[string]DType, len(dtypeInfo))
	for d := range dtypeInfo {
		if dtypeInfo[d].name != "" {
			m[dtypeInfo[d].name] = DType(d)
		}
	}
	return m
}()

// ParseDType returns the DType a header spells as s ("BF16", "F8_E4M3"),
// and false for a spelling the format does not define. The match is exact:
// "bf16" is not a safetensors dtype.
func ParseDType(s string) (DType, bool) {
	d, ok := dtypeByName[s]
	return d, ok
}

// Valid reports whether d is one of the dtypes above.
func (d DType) Valid() bool {
	return d != 0 && int(d) < len(dtypeInfo)
}

// Bits is the size of one element in bits (4 for F4, 6 for the F6 types,
// 16 for BF16); 0 for an invalid DType.
func (d DType) Bits() int64 {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].bits
}

// String is the header's spelling ("BF16"), or "DType(N)" for an invalid
// DType.
func (d DType) String() string {
	if !d.Valid() {
		return "DType(" + strconv.Itoa(int(d)) + ")"
	}
	return dtypeInfo[d].name
}
