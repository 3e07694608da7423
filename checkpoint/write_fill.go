package checkpoint

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
)

// filler writes a tensor's deterministic pseudo-random contents: a PCG
// stream seeded with (seed, FNV-1a 64 of the tensor's name), 8 bytes per draw,
// each 8-byte word masked lane by lane so that every float element is
// finite. The bytes depend on the seed, the name and the dtype only, never
// on the tensor's place in the file or on the sharding.
//
// The masks pin a float's exponent to four binades and keep its sign, the
// two low exponent bits and the mantissa random, so the values are
// weight-sized and none is Inf, NaN or a subnormal:
//   - BF16, F16, F32, C64 (two F32), F64, F8_E5M2: exponent 2^-7 … 2^-4,
//     |x| in [2^-7, 2^-3) = [0.0078, 0.125); F8_E5M2FNUZ (bias 16) one
//     binade lower;
//   - F8_E4M3: exponent field 4 … 7, |x| in [0.125, 1.875]; F8_E4M3FNUZ
//     (bias 8) one binade lower (E4M3's NaN, S.1111.111, and the FNUZ NaN,
//     0x80, are never drawn);
//   - F8_E8M0 (a power-of-two scale; 0xFF is NaN): 2^-7 … 2^-4;
//   - BOOL: 0 or 1; integers, F4 and the F6 types (every code finite):
//     the raw random bits.
type filler struct {
	rng  *rand.Rand
	keep uint64 // bits of each word kept from the draw
	set  uint64 // bits forced to 1 after masking
}

// Lane masks, repeated across a 64-bit word (little-endian lanes).
const (
	rep8  = 0x0101010101010101
	rep16 = 0x0001000100010001
	rep32 = 0x0000000100000001
)

// newFiller returns the filler of a tensor called name of dtype d.
func newFiller(seed uint64, name string, d DType) *filler {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name)) // a hash.Hash never fails
	f := &filler{rng: rand.New(rand.NewPCG(seed, h.Sum64())), keep: ^uint64(0)}
	switch d {
	case BF16:
		// sign | exponent 0b011110xx (120..123, bias 127) | 7-bit mantissa
		f.keep, f.set = 0x81FF*rep16, 0x3C00*rep16
	case F16:
		// sign | exponent 0b010xx (8..11, bias 15) | 10-bit mantissa
		f.keep, f.set = 0x8FFF*rep16, 0x2000*rep16
	case F32, C64:
		// sign | exponent 0b011110xx (120..123, bias 127) | 23-bit mantissa
		f.keep, f.set = 0x81FFFFFF*rep32, 0x3C000000*rep32
	case F64:
		// sign | exponent 0b011111110xx (1016..1019, bias 1023) | 52-bit mantissa
		f.keep, f.set = 0x803FFFFFFFFFFFFF, 0x3F80000000000000
	case F8E4M3, F8E4M3FNUZ:
		// sign | exponent 0b01xx (4..7) | 3-bit mantissa
		f.keep, f.set = 0x9F*rep8, 0x20*rep8
	case F8E5M2, F8E5M2FNUZ:
		// sign | exponent 0b010xx (8..11) | 2-bit mantissa
		f.keep, f.set = 0x8F*rep8, 0x20*rep8
	case F8E8M0:
		// exponent 0b011110xx (120..123, bias 127)
		f.keep, f.set = 0x03*rep8, 0x78*rep8
	case Bool:
		f.keep, f.set = 0x01*rep8, 0
	}
	return f
}

// fill overwrites p with the next len(p) bytes of the stream. len(p) must be
// a multiple of 8 except on the tensor's last call, so that the stream does
// not depend on how the caller chunks it.
func (f *filler) fill(p []byte) {
	i := 0
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], f.rng.Uint64()&f.keep|f.set)
	}
	if i < len(p) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], f.rng.Uint64()&f.keep|f.set)
		copy(p[i:], w[:])
	}
}
