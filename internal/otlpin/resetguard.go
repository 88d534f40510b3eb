package otlpin

import (
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
)

// ResetGuard wraps the listener of a gRPC server that is not the OTLP
// receiver's (GRPCListener guards that one itself) so that a connection
// flooding stream resets — more than 100, and more than half of the
// streams it opened: HTTP/2's "rapid reset" — is closed, onFlood called
// once with its peer's address. Over TLS, give the server's credentials
// through ResetGuardCredentials, so that the frames are followed above the
// handshake.
func ResetGuard(ln net.Listener, onFlood func(peer string)) net.Listener {
	return &guardListener{Listener: ln, onFlood: onFlood}
}

type guardListener struct {
	net.Listener
	onFlood func(peer string)
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return &guardConn{Conn: c, flood: &floodOnce{peer: c.RemoteAddr().String(), fn: l.onFlood}}, nil
}

// floodOnce calls fn once for a connection's flood.
type floodOnce struct {
	once sync.Once
	peer string
	fn   func(peer string)
}

func (f *floodOnce) report() error {
	f.once.Do(func() {
		if f.fn != nil {
			f.fn(f.peer)
		}
	})
	return errResetFlood
}

// guardConn follows the frames the client sends (h2Scan) and ends its
// reads once it floods resets.
type guardConn struct {
	net.Conn
	scan   h2Scan
	flood  *floodOnce
	sealed atomic.Bool // TLS: followed above the handshake instead
}

func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.sealed.Load() {
		c.scan.feed(p[:n])
		if c.scan.flooded() {
			return 0, c.flood.report()
		}
	}
	return n, err
}

// ResetGuardCredentials wraps the TLS credentials of a gRPC server served
// on ResetGuard, so that each connection's frames are followed in the
// clear.
func ResetGuardCredentials(c credentials.TransportCredentials) credentials.TransportCredentials {
	return liftCreds{c, func(raw net.Conn) func(net.Conn) net.Conn {
		gc, ok := raw.(*guardConn)
		if !ok {
			return nil
		}
		gc.sealed.Store(true)
		return func(conn net.Conn) net.Conn { return &guardConn{Conn: conn, flood: gc.flood} }
	}}
}
