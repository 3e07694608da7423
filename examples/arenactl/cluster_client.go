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
// cluster: the node to ask, the address this process answers on, how
// long an answer may take, and the TLS credentials.
type clusterFlags struct {
	cluster string
	listen  string
	timeout time.Duration
	tls     tlsFlags
}

// register adds --client-listen, --timeout and the TLS flags to fs
// (--cluster is added by each command, with its own usage).
func (f *clusterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "client-listen", "127.0.0.1:0",
		"address (host:port) this command's remote answers on: the nodes send their answers there, so across hosts name this host's address (port 0: any free port)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for each answer")
	f.tls.register(fs, "this command's --client-listen host, where the nodes dial it to answer")
}

// tlsFlags are --tls-cert, --tls-key and --tls-ca: the PEM files of the
// process's TLS credentials for the cluster's gRPC (node.TLSFiles).
type tlsFlags node.TLSFiles

// register adds the TLS flags to fs; names says what host the
// certificate must name.
func (t *tlsFlags) register(fs *pflag.FlagSet, names string) {
	fs.StringVar(&t.Cert, "tls-cert", "", "TLS certificate (PEM) for the cluster's gRPC, naming "+names+" (an IP or DNS subject alternative name); with --tls-key")
	fs.StringVar(&t.Key, "tls-key", "", "the private key (PEM) of --tls-cert")
	fs.StringVar(&t.CA, "tls-ca", "", "certificate authority (PEM) every peer's certificate must chain to: mutual TLS (without it: the system's roots, no client certificates checked)")
}

// credentials loads the TLS files; nil without any.
func (t tlsFlags) credentials() (*node.Credentials, error) {
	if t == (tlsFlags{}) {
		return nil, nil
	}
	creds, err := node.LoadCredentials(node.TLSFiles(t))
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key, --tls-ca: %w", err)
	}
	return creds, nil
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

// connect starts an actor system and its remote on --client-listen (with
// the TLS flags' credentials) and returns a node.Client sending from it;
// stop stops both. protoactor-go's
// own logs go to logger at --log-level debug only: at shutdown every
// endpoint writer logs its closed connection at error level, and the
// Client returns what failed.
func (f *clusterFlags) connect(a *app) (client *node.Client, stop func(), err error) {
	logger := slog.New(slog.DiscardHandler)
	if a.logLevel == "debug" {
		logger = a.logger
	}
	creds, err := f.tls.credentials()
	if err != nil {
		return nil, nil, err
	}
	if err := reachable("cluster", f.cluster, f.timeout); err != nil {
		return nil, nil, err
	}
	host, p, _ := net.SplitHostPort(f.listen)
	port, _ := strconv.Atoi(p)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	r := remote.NewRemote(system, node.RemoteConfig(host, port, creds, 0))
	if err := startRemote(r); err != nil {
		system.Shutdown()
		return nil, nil, fmt.Errorf("--client-listen %s: %w", f.listen, err)
	}
	return node.NewClient(system, f.timeout), func() {
		r.Shutdown(true)
		system.Shutdown()
	}, nil
}

// reachable dials addr (the --flag address of a node) once over TCP and
// hangs up, so that a node that is not there is said at once rather than
// after --timeout.
func reachable(flag, addr string, timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, min(timeout, 2*time.Second))
	if err != nil {
		return fmt.Errorf("--%s %s: no node answers there (%w): is \"arenactl node --listen %s\" running?", flag, addr, err, addr)
	}
	return c.Close()
}

// explain adds to a timeout what it may mean when this command runs
// without TLS: nodes on TLS cannot dial its plaintext --client-listen, so
// their answers never come.
func (f *clusterFlags) explain(err error) error {
	if errors.Is(err, actor.ErrTimeout) && f.tls == (tlsFlags{}) {
		return fmt.Errorf("%w (no answer within --timeout %v: the node may have stopped, or the address may be a node's membership endpoint (its --listen port + 1) rather than its --listen; and nodes started with --tls-cert answer only clients given --tls-cert and --tls-key)", err, f.timeout)
	}
	return err
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
