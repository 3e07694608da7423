//go:build !unix

package arena

// openNonBlock is 0 where the os package has no O_NONBLOCK: LoadConfig
// relies on checking the path before it opens it.
const openNonBlock = 0
