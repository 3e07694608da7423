package checkpoint

import "hash/crc32"

// zerosChecksum is the CRC-32C (NewHash) of n zero bytes, in O(log n): the
// CRC register after a zero byte is a linear map of the register before it
// (a 32×32 matrix over GF(2)), so n zero bytes are that map to the n-th
// power, by repeated squaring — the method of zlib's crc32_combine
// (crc32.c, gf2_matrix_times and gf2_matrix_square). Writes of checkpoints
// of zeros (WriteOptions.Zeros) use it: hashing 688 GB of zeros would take
// minutes.
func zerosChecksum(n int64) uint32 {
	// op is the map of one zero bit: the reflected register shifts right,
	// and the polynomial is XORed in when the bit shifted out was 1.
	var op [32]uint32
	op[0] = crc32.Castagnoli // the reflected polynomial
	for i := 1; i < 32; i++ {
		op[i] = 1 << (i - 1)
	}
	for range 3 { // one zero bit → two → four → eight: one zero byte
		op = gf2Square(op)
	}
	reg := ^uint32(0) // the register after the initial inversion
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			reg = gf2Times(op, reg)
		}
		op = gf2Square(op)
	}
	return ^reg
}

// gf2Times is the matrix m (column i: the image of bit i) times vector v.
func gf2Times(m [32]uint32, v uint32) uint32 {
	var out uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 == 1 {
			out ^= m[i]
		}
	}
	return out
}

// gf2Square is m times m.
func gf2Square(m [32]uint32) [32]uint32 {
	var out [32]uint32
	for i := range m {
		out[i] = gf2Times(m, m[i])
	}
	return out
}
