//go:build unix

package arena

import "syscall"

// openNonBlock makes LoadConfig's open return at once even when the path
// became a named pipe after it was checked; the check of the opened file
// then refuses it.
const openNonBlock = syscall.O_NONBLOCK
