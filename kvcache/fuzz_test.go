package kvcache

import "testing"

// FuzzPool drives the model-based test's op stream from the fuzzer's
// bytes: the first picks the pool config, the second the hash (colliding
// ones included), and each later byte one choice of the driver (which
// request, which sequence, which tokens). Every step is compared with the
// reference and the invariants are checked.
func FuzzPool(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{1, 1, 200, 3, 7, 1, 0, 2, 2, 2, 9, 9, 9, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4})
	f.Add([]byte{2, 2, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})
	f.Add([]byte{4, 1, 255, 254, 253, 1, 2, 3, 0, 0, 0, 7, 7, 7, 3, 3, 3, 3, 1, 0, 1, 0, 1})
	f.Add([]byte{6, 0, 5, 5, 5, 5, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 8, 8, 8})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		groups := modelConfigs[int(data[0])%len(modelConfigs)]
		hash := modelHashes[int(data[1])%len(modelHashes)].hash
		rest := data[2:]
		d := newDriver(t, groups, hash, func(n int) (int, bool) {
			if len(rest) == 0 {
				return 0, false
			}
			c := int(rest[0]) % n
			rest = rest[1:]
			return c, true
		})
		d.run(t, len(data))
	})
}
