package arena

import (
	"strings"
	"testing"
)

// TestDevicePresets: every preset has a driver-reported total below its
// nominal size and a source; names look up case-insensitively; an unknown
// name lists the presets.
func TestDevicePresets(t *testing.T) {
	nominal := map[string]int64{ // the data sheet's size, which the driver's total is below
		"h100-80gb": 80 << 30, "h200": 141 << 30, "a100-40gb": 40 << 30, "a100-80gb": 80 << 30,
		"l4": 24 << 30, "rtx-4090": 24 << 30, "rtx-3090": 24 << 30, "dgx-spark": 128 << 30,
	}
	ps := DevicePresets()
	if len(ps) != len(nominal) {
		t.Fatalf("%d presets, want %d", len(ps), len(nominal))
	}
	for _, p := range ps {
		n, ok := nominal[p.Name]
		if !ok || p.TotalBytes <= n*8/10 || p.TotalBytes >= n || p.Source == "" || p.Device == "" {
			t.Errorf("preset %+v (nominal %d B)", p, n)
		}
	}
	for _, name := range []string{"H200", "h200", " h200 "} {
		if p, err := LookupDevicePreset(name); err != nil || p.TotalBytes != 150_109_880_320 {
			t.Errorf("LookupDevicePreset(%q) = %+v, %v", name, p, err)
		}
	}
	if p, err := LookupDevicePreset("RTX_4090"); err != nil || p.TotalBytes != 25_386_352_640 {
		t.Errorf("rtx_4090: %+v, %v", p, err)
	}
	if _, err := LookupDevicePreset("h300"); !isOption(err, "device") || !strings.Contains(err.Error(), "h100-80gb, h200, a100-40gb") {
		t.Errorf("unknown: %v", err)
	}
	// The caller's copy does not change the presets.
	ps[0].TotalBytes = 1
	if DevicePresets()[0].TotalBytes == 1 {
		t.Error("DevicePresets shares its slice")
	}
}
