//go:build !linux

package node

import "syscall"

// childProcAttr is nil off Linux: there is no parent-death signal, and the
// test's cleanup stops the node processes.
func childProcAttr() *syscall.SysProcAttr { return nil }
