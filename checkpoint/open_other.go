//go:build !unix

package checkpoint

// openNonBlock is 0 where the os package has no O_NONBLOCK: Open relies on
// checking a path before it opens it.
const openNonBlock = 0
