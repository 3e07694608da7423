package gpuworker_test

import (
	"errors"
	"testing"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

func TestParseMachine(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		n     int
		bytes int64
		name  string
	}{
		{"8xh200", 8, arena.H200TotalBytes, "hostsim NVIDIA H200"},
		{"2", 2, arena.H200TotalBytes, "hostsim NVIDIA H200"},
		{"h100-80gb", 1, 85_045_477_376, "hostsim NVIDIA H100 80GB HBM3"},
		{" 4XA100_80GB ", 4, 85_100_068_864, "hostsim NVIDIA A100-SXM4-80GB"},
		{"16", 16, arena.H200TotalBytes, "hostsim NVIDIA H200"},
	} {
		c, err := gpuworker.ParseMachine(tc.spec)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if len(c.Devices) != tc.n {
			t.Fatalf("%q: %d devices, want %d", tc.spec, len(c.Devices), tc.n)
		}
		for i, d := range c.Devices {
			if d.TotalBytes != tc.bytes || d.Name != tc.name {
				t.Errorf("%q device %d: %q of %d B, want %q of %d B", tc.spec, i, d.Name, d.TotalBytes, tc.name, tc.bytes)
			}
		}
	}
	for _, spec := range []string{"", "0", "17", "-1", "3xfoo", "x", "h300", "2x"} {
		_, err := gpuworker.ParseMachine(spec)
		var oe *arena.OptionError
		if !errors.As(err, &oe) || oe.Option != "devices" {
			t.Errorf("%q: %v, want an *arena.OptionError for devices", spec, err)
		}
	}
}

// Each device of a machine is its own: its capacity, its ordinal, its
// memory and its fault plan.
func TestHostSimMachineDevicesAreTheirOwn(t *testing.T) {
	m, err := gpuworker.NewHostSimMachine(gpuworker.MachineConfig{
		Devices: []gpuworker.HostSimConfig{{TotalBytes: 64 * mib}, {TotalBytes: 32 * mib}},
		Faults:  []gpuworker.Faults{{}, {FailAllocAt: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	fs := m.Factories()
	b0, _ := fs[0]()
	b1, _ := fs[1]()
	defer b0.Close()
	defer b1.Close()
	if i0, i1 := b0.Info(), b1.Info(); i0.Ordinal != 0 || i1.Ordinal != 1 || i0.TotalBytes != 64*mib || i1.TotalBytes != 32*mib {
		t.Fatalf("infos %+v, %+v: want ordinals 0, 1 of 64 and 32 MiB", i0, i1)
	}
	if _, err := b1.Alloc(mib); !errors.Is(err, gpuworker.ErrOutOfMemory) {
		t.Fatalf("device 1's first alloc: %v, want the injected ErrOutOfMemory", err)
	}
	if _, err := b0.Alloc(mib); err != nil {
		t.Fatal(err)
	}
	if m.Device(0).BytesInUse() != mib || m.Device(1).BytesInUse() != 0 {
		t.Fatalf("bytes in use %d, %d; want %d, 0", m.Device(0).BytesInUse(), m.Device(1).BytesInUse(), mib)
	}
	if _, ok := b0.(gpuworker.Compute); !ok {
		t.Fatal("a machine's device lost hostsim's Compute")
	}
	for _, c := range []gpuworker.MachineConfig{{}, {Devices: make([]gpuworker.HostSimConfig, 1), Faults: make([]gpuworker.Faults, 2)}, {Devices: []gpuworker.HostSimConfig{{TotalBytes: -1}}}} {
		if _, err := gpuworker.NewHostSimMachine(c); !errors.Is(err, gpuworker.ErrInvalidValue) {
			t.Errorf("NewHostSimMachine(%+v): %v, want ErrInvalidValue", c, err)
		}
	}
}
