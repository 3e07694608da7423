package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/gpuarena/gpuarena/examples/internal/vllmflags"
)

// app is what every command shares: the logger the root's --log-level sets up.
type app struct {
	logLevel string
	logger   *slog.Logger
}

const rootLong = `arenactl sizes the GPU memory arena of an LLM forward pass from a Hugging
Face config.json (plan), checks it against a device (fit), builds it on a
device and runs forward steps on it (run), lists devices (devices), measures
the GPU actor against its peers (bench), and runs mixed load for a long time,
closing under load (soak), writes model folders of random weights with
the real tensor names to test loaders with (gen-model), lists the
multi-GPU layouts a model fits (place), and runs a node of a cluster of
hosts and talks to one (node, cluster).

Logs go to stderr (slog text), at --log-level (default warn).

Flags take vLLM's names too: --max-model-len (--max-seq-len),
--max-num-batched-tokens (--max-batch-tokens), --max-num-seqs
(--max-batch-size), --block-size (--kv-block-size), --max-lora-rank
(--lora-max-rank), and underscores for dashes.

Exit status:
  0  success
  1  a negative answer: fit does not fit; run or soak found an invariant broken
  2  an error: bad flag or config, device or backend failure
  130  stopped by Ctrl-C (SIGINT; 143: SIGTERM), after releasing what it built`

// newRootCmd builds the command tree. Commands write their output to
// cmd.OutOrStdout() and their logs to cmd.ErrOrStderr(); errors are returned,
// never printed, and execute prints them once.
func newRootCmd() *cobra.Command {
	a := &app{logger: slog.New(slog.DiscardHandler)}
	root := &cobra.Command{
		Use:           "arenactl",
		Short:         "Plan, fit and exercise a gpuarena GPU memory arena",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", a.logLevel)
			}
			a.logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetGlobalNormalizationFunc(vllmflags.Normalize)
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())
	})
	root.AddCommand(newPlanCmd(a), newFitCmd(a), newPlaceCmd(a), newRunCmd(a), newDevicesCmd(a))
	root.AddCommand(newBenchCmd(a))
	root.AddCommand(newSoakCmd(a))
	root.AddCommand(newGenModelCmd(a))
	root.AddCommand(newNodeCmd(a), newClusterCmd(a))
	return root
}
