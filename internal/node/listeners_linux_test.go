package node

import (
	"fmt"
	"os"
	"strings"
)

// listeningSockets returns the TCP sockets process pid listens on, as
// "ADDRESS:PORT" in /proc/net/tcp{,6}'s hex notation, found through the
// socket inodes among its file descriptors; ok is false where /proc does
// not tell.
func listeningSockets(pid int) (socks []string, ok bool) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, false
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if ino, found := strings.CutPrefix(link, "socket:["); err == nil && found {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, false
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st ... inode (field 9); st 0A is LISTEN.
			if len(f) > 9 && f[3] == "0A" && inodes[f[9]] {
				socks = append(socks, f[1])
			}
		}
	}
	return socks, true
}
