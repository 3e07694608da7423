// Arenactl sizes, fits and exercises a gpuarena arena from the command line.
//
//	arenactl plan    --config config.json   one row per buffer, and the total
//	arenactl fit     --config config.json   does the plan fit the device?
//	arenactl run                            build, run forward steps, release
//	arenactl devices                        list the visible devices
//	arenactl bench                          the GPU actor against its peers
//	arenactl soak    --duration 10m         mixed load, closing under load
//
// Every command takes --log-level; plan, fit, run, devices and bench take
// --json. Exit status: 0 success; 1 a negative answer (fit: does not fit;
// run, soak: an invariant failed); 2 an error (bad flag, bad config, device
// failure); 130 stopped by Ctrl-C (SIGINT), 143 by SIGTERM.
package main

import (
	"context"
	"os"
)

// main runs arenactl; Ctrl-C (SIGINT) or SIGTERM stops submitting work,
// what was built is still released, and the exit status is 130 (SIGINT) or
// 143 (SIGTERM).
func main() {
	ctx, stop := notifyContext(context.Background())
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
