package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/spf13/pflag"

	"github.com/gpuarena/gpuarena/internal/node"
)

// clusterFlags are the flags of every command that talks to a running
// cluster: the node to ask, the address this process answers on, and how
// long an answer may take.
type clusterFlags struct {
	cluster string
	listen  string
	timeout time.Duration
}

// register adds --client-listen and --timeout to fs (--cluster is added
// by each command, with its own usage).
func (f *clusterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "client-listen", "127.0.0.1:0",
		"address (host:port) this command's remote answers on: the nodes send their answers there, so across hosts name this host's address (port 0: any free port)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for each answer")
}

// checkHostPort refuses an address that is not host:port with a port in
// [minPort, 65535].
func checkHostPort(flag, addr string, minPort int) error {
	host, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || host == "" || port < minPort || port > 65535 {
		return fmt.Errorf("--%s %q: want host:port, e.g. 127.0.0.1:7700", flag, addr)
	}
	return nil
}

// check refuses bad flags before anything starts.
func (f *clusterFlags) check() error {
	if f.cluster == "" {
		return errors.New("--cluster: the address (host:port) of a node of the cluster is required")
	}
	if err := checkHostPort("cluster", f.cluster, 1); err != nil {
		return err
	}
	if err := checkHostPort("client-listen", f.listen, 0); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be > 0", f.timeout)
	}
	return nil
}

// connect starts an actor system and its remote on --client-listen and
// returns a node.Client sending from it; stop stops both. protoactor-go's
// own logs go to logger at --log-level debug only: at shutdown every
// endpoint writer logs its closed connection at error level, and the
// Client returns what failed.
func (f *clusterFlags) connect(a *app) (client *node.Client, stop func(), err error) {
	logger := slog.New(slog.DiscardHandler)
	if a.logLevel == "debug" {
		logger = a.logger
	}
	host, p, _ := net.SplitHostPort(f.listen)
	port, _ := strconv.Atoi(p)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	r := remote.NewRemote(system, remote.Configure(host, port))
	if err := startRemote(r); err != nil {
		system.Shutdown()
		return nil, nil, fmt.Errorf("--client-listen %s: %w", f.listen, err)
	}
	return node.NewClient(system, f.timeout), func() {
		r.Shutdown(true)
		system.Shutdown()
	}, nil
}

// startRemote starts r, returning protoactor-go's panic (a port it cannot
// listen on: remote/server.go) as an error.
func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("starting the remote: %v", p)
		}
	}()
	r.Start()
	return nil
}
