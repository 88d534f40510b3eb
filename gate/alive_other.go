//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package gate

// open cannot look at the socket here: the request goes out and, if the
// upstream had closed the connection, fails with 502.
func (pc *h1Conn) open() bool { return true }

// rawPeek is empty where open cannot look at the socket.
type rawPeek struct{}
