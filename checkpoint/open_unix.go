//go:build unix

package checkpoint

import "syscall"

// openNonBlock makes opening a path that became a named pipe after it was
// checked return at once; the check of the opened file then refuses it.
const openNonBlock = syscall.O_NONBLOCK
