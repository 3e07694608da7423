package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuarena/gpuarena/gpuworker"
)

func TestDevicesHostSim(t *testing.T) {
	r := cli(t, "devices", "--json").mustSucceed(t)
	var got devicesJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.Backend != "hostsim" || len(got.Devices) != 1 {
		t.Fatalf("got %+v, want one hostsim device", got)
	}
	d := got.Devices[0]
	if d.Ordinal != 0 || d.TotalBytes != gpuworker.H200Bytes || d.FreeBytes != d.TotalBytes {
		t.Errorf("device %+v: want ordinal 0, %d B total, all free", d, gpuworker.H200Bytes)
	}

	text := cli(t, "devices", "--device-memory", "80GiB").mustSucceed(t)
	if lines := strings.Split(strings.TrimSpace(text.stdout), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "80.00 GiB") {
		t.Errorf("devices: want a header and one 80 GiB device, got:\n%s", text.stdout)
	}
}

// TestDevicesCUDA: in a build without the cuda tag the cuda backend is
// reported as not built, once, with exit status 2.
func TestDevicesCUDA(t *testing.T) {
	r := cli(t, "devices", "--backend", "cuda")
	if r.code == exitOK {
		t.Skipf("a cuda build: %s", r.stdout)
	}
	if r.code != exitFailure || !strings.Contains(r.stderr, "cuda") || strings.Count(r.stderr, "arenactl: ") != 1 {
		t.Errorf("exit %d, stderr %q: want exit %d and one error naming cuda", r.code, r.stderr, exitFailure)
	}
}
