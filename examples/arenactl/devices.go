package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// maxOrdinals bounds the CUDA ordinals probed, in case a backend never
// answers ErrNoDevice.
const maxOrdinals = 64

const devicesLong = `Devices lists the devices the backend sees: ordinal, name, total and free
memory. hostsim has one simulated device of --device-memory bytes. cuda
opens ordinals 0, 1, 2, … until one does not exist (a build without -tags
cuda reports that the cuda backend is not built); "no CUDA devices" when
ordinal 0 does not exist.

--json prints {"backend", "devices": [{"ordinal", "name", "total_bytes",
"free_bytes", "compute_capability"}]}.`

// devicesCmd holds the flags of "arenactl devices".
type devicesCmd struct {
	app     *app
	backend backendFlags
	jsonOut bool
}

// newDevicesCmd builds "arenactl devices".
func newDevicesCmd(a *app) *cobra.Command {
	c := &devicesCmd{app: a}
	cmd := &cobra.Command{
		Use:   "devices [--backend hostsim|cuda] [flags]",
		Short: "List the visible devices",
		Long:  devicesLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.run(cmd.Context(), cmd.OutOrStdout(), cmd.Flags().Changed)
		},
	}
	c.backend.register(cmd.Flags(), false)
	cmd.Flags().BoolVar(&c.jsonOut, "json", false, "print the devices as JSON")
	return cmd
}

// deviceJSON is one device of the --json output.
type deviceJSON struct {
	Ordinal           int    `json:"ordinal"`
	Name              string `json:"name"`
	TotalBytes        int64  `json:"total_bytes"`
	FreeBytes         int64  `json:"free_bytes"`
	ComputeCapability string `json:"compute_capability"`
}

// devicesJSON is the --json output of devices.
type devicesJSON struct {
	Backend string       `json:"backend"`
	Devices []deviceJSON `json:"devices"`
}

// run probes the devices and writes the list; changed reports whether a
// flag was set on the command line.
func (c *devicesCmd) run(ctx context.Context, w io.Writer, changed func(string) bool) error {
	out := devicesJSON{Backend: c.backend.kind, Devices: []deviceJSON{}}
	for ordinal := range maxOrdinals {
		if c.backend.kind == gpuworker.KindHostSim && ordinal > 0 {
			break
		}
		bc, err := c.backend.config(ordinal, changed)
		if err != nil {
			return err
		}
		d, err := probe(ctx, bc, c.app)
		if errors.Is(err, gpuworker.ErrNoDevice) {
			break
		}
		if err != nil {
			return fmt.Errorf("device %d: %w", ordinal, err)
		}
		out.Devices = append(out.Devices, d)
	}
	if c.jsonOut {
		return writeJSON(w, out)
	}
	if len(out.Devices) == 0 {
		_, err := fmt.Fprintln(w, "no CUDA devices") // hostsim always has one
		return err
	}
	tw := newTable(w)
	row(tw, "ORDINAL", "NAME", "CC", "TOTAL", "FREE")
	for _, d := range out.Devices {
		row(tw, d.Ordinal, d.Name, d.ComputeCapability, human(d.TotalBytes), human(d.FreeBytes))
	}
	return tw.Flush()
}

// probe opens the device through a manager, reads what it is and its free
// memory, and closes it again.
func probe(ctx context.Context, bc gpuworker.BackendConfig, a *app) (_ deviceJSON, err error) {
	m, err := gpuarena.New(gpuarena.WithBackend(bc), gpuarena.WithLogger(a.logger))
	if err != nil {
		return deviceJSON{}, err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	info := m.Device()
	free, total, err := m.MemInfo(ctx)
	if err != nil {
		return deviceJSON{}, err
	}
	return deviceJSON{
		Ordinal: bc.Ordinal, Name: info.Name, TotalBytes: total, FreeBytes: free,
		ComputeCapability: fmt.Sprintf("%d.%d", info.ComputeMajor, info.ComputeMinor),
	}, nil
}
