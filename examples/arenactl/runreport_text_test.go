package main

import (
	"bytes"
	"strings"
	"testing"
)

// The device free line names what was built at each reading: the arena
// alone or with the weights, and the KV cache when one was built.
func TestRunTextDeviceFree(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		r    runReport
		want string
	}{
		{runReport{DeviceFreeBefore: 100 * gib, DeviceFreeBuilt: 90 * gib, DeviceFreeAfter: 100 * gib},
			"before 100.00 GiB, arena built 90.00 GiB, after 100.00 GiB"},
		{runReport{DeviceFreeBefore: 100 * gib, DeviceFreeBuilt: 80 * gib, DeviceFreeKV: 20 * gib, DeviceFreeAfter: 100 * gib, WeightsBytes: 10 * gib},
			"before 100.00 GiB, weights and arena built 80.00 GiB, KV cache built 20.00 GiB, after 100.00 GiB"},
	} {
		var b bytes.Buffer
		writeRunText(&b, &c.r)
		var line string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "device free") {
				line = strings.TrimSpace(strings.TrimPrefix(l, "device free"))
			}
		}
		if line != c.want {
			t.Errorf("device free line %q, want %q", line, c.want)
		}
	}
}
