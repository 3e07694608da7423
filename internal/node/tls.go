package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLSFiles are the PEM files of a process's TLS credentials for the
// cluster's gRPC: Cert and Key its certificate (chain) and private key,
// required together; CA, optional, the certificate authority every peer's
// certificate must chain to. A node's certificate must name the host of
// its --listen address (an IP or DNS subject alternative name), since the
// others dial it there and check; so must a client's (arenactl cluster,
// place --cluster) for its --client-listen host, because the nodes dial
// the client to answer.
type TLSFiles struct {
	Cert, Key, CA string
}

// Credentials are a process's TLS credentials for protoactor-go's remote:
// what its gRPC server presents and checks, and what it dials peers with.
// With a CA they are mutual: the server requires a client certificate
// signed by the CA and the dialer trusts only servers signed by it;
// without one the server asks for no client certificate and the dialer
// trusts the system's roots.
type Credentials struct {
	server, dial *tls.Config
}

// NewCredentials returns the credentials of cert, mutual over ca when ca
// is not nil; TLS 1.3 at least (every peer is a gpuarena binary).
func NewCredentials(cert tls.Certificate, ca *x509.CertPool) *Credentials {
	server := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	dial := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if ca != nil {
		server.ClientCAs = ca
		server.ClientAuth = tls.RequireAndVerifyClientCert
		dial.RootCAs = ca
	}
	return &Credentials{server: server, dial: dial}
}

// LoadCredentials reads f's PEM files into credentials (NewCredentials).
// Errors wrap ErrConfig and name the file: a key without a certificate or
// a certificate without a key, a CA without them (a process that talks to
// nodes also serves their answers, so it needs its own certificate), an
// unreadable file, a key that does not match the certificate, a CA file
// without a PEM certificate.
func LoadCredentials(f TLSFiles) (*Credentials, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("%w: TLS: a certificate and its key are both needed (certificate %q, key %q, CA %q)", ErrConfig, f.Cert, f.Key, f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: TLS certificate %s and key %s: %w", ErrConfig, f.Cert, f.Key, err)
	}
	if f.CA == "" {
		return NewCredentials(cert, nil), nil
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("%w: TLS CA: %w", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: TLS CA %s: no PEM certificate in it", ErrConfig, f.CA)
	}
	return NewCredentials(cert, pool), nil
}

// Mutual reports whether the credentials require and check the peers'
// certificates against a CA.
func (c *Credentials) Mutual() bool { return c != nil && c.server != nil && c.server.ClientCAs != nil }

// RemoteConfig is the protoactor-go remote configuration of a process on
// host:port: gRPC messages up to maxMessageBytes each way (0: gRPC's
// default of 4 MiB received), and creds on both the server and the dials
// (nil: plaintext). Nodes and clients use it alike, so both ends of every
// connection agree.
func RemoteConfig(host string, port int, creds *Credentials, maxMessageBytes int) *remote.Config {
	dial := grpc.WithTransportCredentials(insecure.NewCredentials())
	var server []grpc.ServerOption
	if creds != nil {
		dial = grpc.WithTransportCredentials(credentials.NewTLS(creds.dial))
		server = append(server, grpc.Creds(credentials.NewTLS(creds.server)))
	}
	dials := []grpc.DialOption{dial}
	if maxMessageBytes > 0 {
		server = append(server, grpc.MaxRecvMsgSize(maxMessageBytes))
		dials = append(dials, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(maxMessageBytes)))
	}
	return remote.Configure(host, port, remote.WithServerOptions(server...), remote.WithDialOptions(dials...))
}
