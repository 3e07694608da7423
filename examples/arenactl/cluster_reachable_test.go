package main

import (
	"net"
	"strings"
	"testing"
)

// A --cluster address where no node listens is said at once, not after
// --timeout.
func TestClusterNoNodeThere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := cli(t, "cluster", "inventory", "--cluster", addr, "--timeout", "1h")
	if r.code == exitOK || !strings.Contains(r.stderr, "no node answers there") {
		t.Fatalf("exit %d, stderr %q; want an error saying no node answers", r.code, r.stderr)
	}
}
