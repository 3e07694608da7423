package gpuworker

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuarena/gpuarena/arena"
)

// MaxMachineDevices bounds the devices of one simulated machine: the largest
// NVLink domain of one host that ships (an HGX board has 8 GPUs; 16 leaves
// room for others without letting a typo start thousands of GPU threads).
const MaxMachineDevices = 16

// MachineConfig describes several simulated devices of one host, one
// HostSimConfig and one fault plan per device ordinal, as go-nvml's
// mock/dgxh200 builds an 8-GPU server from one GPU's spec.
type MachineConfig struct {
	// Devices are the devices by ordinal: Devices[i] is device i.
	Devices []HostSimConfig
	// Faults are the devices' fault plans by ordinal (WithFaults); shorter
	// than Devices (nil included) leaves the others without faults.
	Faults []Faults
}

// ParseMachine reads a machine as a user names it: "N" (N simulated H200s),
// or what arena.ParseMachine reads: a device preset ("h200", "h100-80gb":
// one device of its capacity, arena.DevicePresets) or "NxPRESET" ("8xh200",
// "2xa100-80gb": N of them). Each device is named "hostsim " + the preset's driver name
// ("hostsim NVIDIA H200") and has the preset's total memory
// (arena.DevicePreset.TotalBytes). Errors: an *arena.OptionError for
// "devices" (errors.Is arena.ErrInvalidOption) naming the spec, for a count
// outside [1, MaxMachineDevices] or an unknown preset (it lists the presets).
func ParseMachine(spec string) (MachineConfig, error) {
	s := strings.TrimSpace(spec)
	if _, err := strconv.Atoi(s); err == nil {
		s += "xh200" // a bare count is of H200s
	}
	m, err := arena.ParseMachine(s)
	if err != nil {
		return MachineConfig{}, err
	}
	if m.Count > MaxMachineDevices {
		return MachineConfig{}, &arena.OptionError{Option: "devices", Value: spec,
			Reason: fmt.Sprintf("want 1 to %d simulated devices: a count (\"8\"), a preset (\"h200\") or both (\"8xh200\")", MaxMachineDevices)}
	}
	c := MachineConfig{Devices: make([]HostSimConfig, m.Count)}
	for i := range c.Devices {
		c.Devices[i] = HostSimConfig{Name: "hostsim " + m.Preset.Device, TotalBytes: m.Preset.TotalBytes}
	}
	return c, nil
}

// HostSimMachine is several simulated devices, one per ordinal, each with
// its own capacity, memory and fault plan. Its Factories feed one GPU
// worker per device (gpuarena.NewGroup); its Device handles stay readable
// from any goroutine for what HostSim allows (Threads, BytesInUse).
type HostSimMachine struct {
	devices []*HostSim
	faults  []Faults
}

// NewHostSimMachine makes the devices of c. Errors: ErrInvalidValue for no
// devices, more than MaxMachineDevices, more fault plans than devices, or
// a device NewHostSim refuses (it names the ordinal).
func NewHostSimMachine(c MachineConfig) (*HostSimMachine, error) {
	switch {
	case len(c.Devices) == 0 || len(c.Devices) > MaxMachineDevices:
		return nil, fmt.Errorf("hostsim machine of %d devices: %w: want 1 to %d", len(c.Devices), ErrInvalidValue, MaxMachineDevices)
	case len(c.Faults) > len(c.Devices):
		return nil, fmt.Errorf("hostsim machine: %w: %d fault plans for %d devices", ErrInvalidValue, len(c.Faults), len(c.Devices))
	}
	m := &HostSimMachine{devices: make([]*HostSim, len(c.Devices)), faults: make([]Faults, len(c.Devices))}
	copy(m.faults, c.Faults)
	for i, dc := range c.Devices {
		d, err := NewHostSim(dc)
		if err != nil {
			return nil, fmt.Errorf("hostsim machine device %d: %w", i, err)
		}
		m.devices[i] = d
	}
	return m, nil
}

// Device returns device ordinal i (0 ≤ i < the machine's devices), for
// Threads and BytesInUse.
func (m *HostSimMachine) Device(i int) *HostSim { return m.devices[i] }

// Factories returns one BackendFactory per device, in ordinal order: each
// opens its device (wrapped in its fault plan when it has one) reporting
// DeviceInfo.Ordinal = its index. A factory opens the same device every
// time it is called.
func (m *HostSimMachine) Factories() []BackendFactory {
	fs := make([]BackendFactory, len(m.devices))
	for i, d := range m.devices {
		var b Backend = &machineDevice{HostSim: d, ordinal: i}
		if m.faults[i].planned() {
			b = WithFaults(b, m.faults[i])
		}
		fs[i] = func() (Backend, error) { return b, nil }
	}
	return fs
}

// machineDevice is one device of a machine: the simulated device, with its
// ordinal in Info. It keeps HostSim's optional interfaces (Compute,
// BytesInUseReporter) by embedding it.
type machineDevice struct {
	*HostSim
	ordinal int
}

// Info describes the device, with its ordinal in the machine.
func (d *machineDevice) Info() DeviceInfo {
	info := d.HostSim.Info()
	info.Ordinal = d.ordinal
	return info
}

// planned reports whether the plan has any fault at all.
func (f Faults) planned() bool {
	return f.FailAllocAt != 0 || f.FailFreeAt != 0 || f.FailMemsetAt != 0 || f.FailCopyAt != 0 ||
		f.Delay != 0 || f.PanicAt != 0 || f.OnCall != nil
}
