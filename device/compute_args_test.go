package device

import "testing"

// A 32-bit argument fills the low half of its 64-bit slot, a negative one
// as its two's complement, as the kernel reads an int or unsigned int.
func TestThirtyTwoBitArgs(t *testing.T) {
	for _, c := range []struct {
		got, want uint64
	}{
		{I32Arg(5), 5}, {I32Arg(-1), 0xffff_ffff}, {I32Arg(-2147483648), 0x8000_0000},
		{U32Arg(7), 7}, {U32Arg(0xffff_ffff), 0xffff_ffff},
	} {
		if c.got != c.want {
			t.Errorf("got %#x, want %#x", c.got, c.want)
		}
	}
}
