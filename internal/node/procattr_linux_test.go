package node

import "syscall"

// childProcAttr kills a node process when the test process dies, so a
// crashed test leaves no node behind (Pdeathsig is Linux's).
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
