package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gpuarena/gpuarena/internal/nodepb"
	"github.com/gpuarena/gpuarena/internal/testkit"
)

// testCA is a self-signed certificate authority (ECDSA P-256) that signs
// certificates for 127.0.0.1 into a test's folder.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
}

// newTestCA makes a CA named name, valid for an hour, and writes its
// certificate to dir.
func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{dir: dir, cert: cert, key: key, file: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue signs a certificate for 127.0.0.1 (server and client use) named
// name and returns its files with the CA's.
func (ca *testCA) issue(t *testing.T, name string, serial int64) TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSFiles{Cert: filepath.Join(ca.dir, name+".pem"), Key: filepath.Join(ca.dir, name+"-key.pem"), CA: ca.file}
	writePEM(t, f.Cert, "CERTIFICATE", der)
	writePEM(t, f.Key, "EC PRIVATE KEY", keyDER)
	return f
}

// writePEM writes one PEM block of type typ to path, readable by its owner
// only.
func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// handshake opens the remote's stream to address with dial and sends the
// remote's ConnectRequest, as a peer joining would; nil when the node
// answers it.
func handshake(address string, dial grpc.DialOption) error {
	conn, err := grpc.NewClient(address, dial)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{
		ConnectRequest: &remote.ConnectRequest{ConnectionType: &remote.ConnectRequest_ServerConnection{
			ServerConnection: &remote.ServerConnection{MemberId: "intruder", Address: "127.0.0.1:1"}}}}}); err != nil {
		return err
	}
	msg, err := stream.Recv()
	if err != nil {
		return err
	}
	if msg.GetConnectResponse() == nil {
		return fmt.Errorf("answered %v", msg)
	}
	return nil
}

// TestTLSClusterOfTwoProcesses starts two node processes with mutual TLS
// (a CA and certificates generated here) and the Static provider: the
// cluster forms, a client with a certificate of the CA reserves on a
// node, and clients without one — plaintext, TLS without a client
// certificate, a certificate of another CA — are refused at the
// handshake.
func TestTLSClusterOfTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two node processes")
	}
	dir := t.TempDir()
	ca := newTestCA(t, dir, "gpuarena-test")
	ports := freePorts(t, 2)
	var seeds []string
	for _, p := range ports {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", p))
	}
	nodes := make([]*child, 2)
	errs := make([]error, 2)
	files := []TLSFiles{ca.issue(t, "node-0", 10), ca.issue(t, "node-1", 11)}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			nodes[i], errs[i] = startChild(t, childSpec{GRPCPort: ports[i], Seeds: seeds, Machine: "1xh100-80gb",
				Refresh: testRefresh, Static: true, TLS: files[i]})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	creds, err := LoadCredentials(ca.issue(t, "client", 12))
	if err != nil {
		t.Fatal(err)
	}
	if !creds.Mutual() {
		t.Fatal("credentials with a CA are not mutual")
	}
	client, shutdown := startTestClientWith(t, creds)
	ctx := context.Background()
	testkit.Eventually(t, 20*time.Second, "the TLS cluster formed", func() error {
		for _, n := range nodes {
			invs, err := client.ClusterInventory(ctx, n.address)
			if err != nil {
				return err
			}
			if len(invs) != 2 {
				return fmt.Errorf("%s sees %v", n.address, addresses(invs))
			}
		}
		return nil
	})
	res, err := client.Reserve(ctx, nodes[1].address, &nodepb.ReserveRequest{Key: "tls/r1", Bytes: 64 << 20, TtlMs: 60_000})
	if err != nil {
		t.Fatalf("reserve over TLS: %v", err)
	}
	led, err := client.Ledger(ctx, nodes[1].address, 0)
	if err != nil || ledgerHeld(led, res.GetOwner()) != 64<<20 {
		t.Fatalf("ledger over TLS: %v, %v; want 64 MiB held by %s", led, err, res.GetOwner())
	}

	other := newTestCA(t, dir, "other")
	stranger, err := LoadCredentials(other.issue(t, "stranger", 20))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	for name, dial := range map[string]grpc.DialOption{
		"plaintext":                  grpc.WithTransportCredentials(insecure.NewCredentials()),
		"no client certificate":      grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13})),
		"another CA's certificate":   grpc.WithTransportCredentials(credentials.NewTLS(stranger.dial)),
		"the CA's, trusting another": grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{Certificates: creds.dial.Certificates, RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS13})),
	} {
		if err := handshake(nodes[0].address, dial); err == nil {
			t.Errorf("%s: the node took the connection", name)
		}
	}
	if err := handshake(nodes[0].address, grpc.WithTransportCredentials(credentials.NewTLS(creds.dial))); err != nil {
		t.Fatalf("the CA's certificate: %v", err)
	}
	if _, err := client.Inventory(ctx, nodes[0].address); err != nil {
		t.Fatalf("the node after refusing strangers: %v", err)
	}
	t.Cleanup(shutdown) // before the nodes stop
}

func TestLoadCredentialsRefusals(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	good := ca.issue(t, "good", 2)
	other := ca.issue(t, "other", 3)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    TLSFiles
		want string
	}{
		{"key without certificate", TLSFiles{Key: good.Key}, "a certificate and its key"},
		{"CA alone", TLSFiles{CA: good.CA}, "a certificate and its key"},
		{"missing certificate file", TLSFiles{Cert: filepath.Join(dir, "none.pem"), Key: good.Key}, "none.pem"},
		{"key of another certificate", TLSFiles{Cert: good.Cert, Key: other.Key}, good.Cert},
		{"CA without a certificate", TLSFiles{Cert: good.Cert, Key: good.Key, CA: notPEM}, "no PEM certificate"},
		{"missing CA", TLSFiles{Cert: good.Cert, Key: good.Key, CA: filepath.Join(dir, "none-ca.pem")}, "none-ca.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadCredentials(tc.f)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadCredentials: %v, %v; want ErrConfig naming %q", c, err, tc.want)
			}
		})
	}
	c, err := LoadCredentials(TLSFiles{Cert: good.Cert, Key: good.Key})
	if err != nil || c.Mutual() {
		t.Fatalf("credentials without a CA: %v, mutual %v; want one-way TLS", err, c.Mutual())
	}
}
