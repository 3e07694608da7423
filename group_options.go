package gpuarena

import (
	"time"

	"github.com/gpuarena/gpuarena/arena"
	"github.com/gpuarena/gpuarena/gpuworker"
)

// GroupOption configures NewGroup.
type GroupOption func(*groupConfig)

type groupConfig struct {
	// factories are the ranks' backends, rank r on factories[r].
	factories []gpuworker.BackendFactory
	// rankOpts are applied to every rank's New, before the group's own.
	rankOpts []Option
	// spin overrides GroupSpin when set.
	spin    time.Duration
	spinSet bool
}

// WithDevices adds one rank per backend configuration, in order: for the
// cuda backend one BackendConfig per device ordinal ({Kind: "cuda",
// Ordinal: r}). The ranks' backends must be distinct devices: two ranks
// on one device would share its memory under two budgets.
func WithDevices(configs ...gpuworker.BackendConfig) GroupOption {
	return func(c *groupConfig) {
		for _, b := range configs {
			c.factories = append(c.factories, b.Factory())
		}
	}
}

// WithDeviceFactories adds one rank per backend factory, in order: for
// simulated machines (gpuworker.HostSimMachine.Factories) and backends of
// the embedder's own.
func WithDeviceFactories(fs ...gpuworker.BackendFactory) GroupOption {
	return func(c *groupConfig) { c.factories = append(c.factories, fs...) }
}

// WithRankOptions applies opts to every rank's manager (New):
// gpu_memory_utilization (per device), the logger, the arena layout. The
// group sets each rank's backend (WithDevices, WithDeviceFactories) and
// dispatcher spin (GroupSpin, WithGroupSpin) after them, so WithBackend and
// WithDispatcherSpin here have no effect.
func WithRankOptions(opts ...Option) GroupOption {
	return func(c *groupConfig) { c.rankOpts = append(c.rankOpts, opts...) }
}

// WithGroupSpin sets every rank's dispatcher spin (WithDispatcherSpin)
// instead of GroupSpin's choice; 0 turns polling off on every rank.
// NewGroup returns an *arena.OptionError for a negative d.
func WithGroupSpin(d time.Duration) GroupOption {
	return func(c *groupConfig) { c.spin, c.spinSet = d, true }
}

// validate checks the group's own settings; New checks each rank's.
func (c *groupConfig) validate() error {
	switch {
	case len(c.factories) == 0:
		return &arena.OptionError{Option: "devices", Value: 0, Reason: "a group needs at least one device: pass WithDevices or WithDeviceFactories"}
	case len(c.factories) > gpuworker.MaxMachineDevices:
		return &arena.OptionError{Option: "devices", Value: len(c.factories), Reason: "more devices than one host has; at most gpuworker.MaxMachineDevices"}
	case c.spinSet && c.spin < 0:
		return &arena.OptionError{Option: "group_spin", Value: c.spin, Reason: "must not be negative"}
	}
	for r, f := range c.factories {
		if f == nil {
			return &arena.OptionError{Option: "devices", Value: r, Reason: "the backend factory of this rank is nil"}
		}
	}
	for i, o := range c.rankOpts {
		if o == nil {
			return &arena.OptionError{Option: "rank options", Value: i + 1, Reason: "option is nil"}
		}
	}
	return nil
}
