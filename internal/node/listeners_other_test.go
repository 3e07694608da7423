//go:build !linux

package node

// listeningSockets is unknown off Linux (no /proc): ok is false.
func listeningSockets(int) ([]string, bool) { return nil, false }
