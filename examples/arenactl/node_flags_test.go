package main

import (
	"strings"
	"testing"
)

func TestNodeRefusesBadFlagsBeforeStarting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--listen", "7700"}, "--listen \"7700\""},
		{[]string{"node", "--listen", "127.0.0.1:0"}, "--listen \"127.0.0.1:0\""},
		{[]string{"node", "--membership-port", "7700"}, "--membership-port 7700"},
		{[]string{"node", "--seeds", "nohost"}, "--seeds \"nohost\": want host:port of each node's membership endpoint"},
		{[]string{"node", "--devices", "99xh200"}, "--devices"},
		{[]string{"node", "--backend", "tpu"}, "--backend \"tpu\""},
		{[]string{"node", "--membership-refresh", "0s"}, "--membership-refresh"},
		{[]string{"node", "--provider", "etcd"}, "--provider \"etcd\""},
		{[]string{"node", "--provider", "static", "--membership-port", "7800"}, "--membership-port: the static provider"},
		{[]string{"node", "--provider", "static", "--probe-timeout", "0s"}, "--probe-timeout"},
		{[]string{"node", "--provider", "static", "--seeds", "nohost"}, "--seeds \"nohost\": want host:port of each node's --listen address"},
		// The static provider has no membership port to derive from the --listen port.
		{[]string{"node", "--provider", "static", "--listen", "127.0.0.1:65535", "--devices", "99xh200"}, "--devices"},
		{[]string{"node", "--tls-key", "node-key.pem"}, "--tls-cert, --tls-key, --tls-ca: bad node configuration: TLS: a certificate and its key are both needed"},
		{[]string{"node", "--tls-cert", "/nonexistent/node.pem", "--tls-key", "/nonexistent/node-key.pem"}, "/nonexistent/node.pem"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			r := cli(t, tc.args...)
			if r.code != exitFailure || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and stderr naming %s", r.code, r.stdout, r.stderr, exitFailure, tc.want)
			}
		})
	}
}
