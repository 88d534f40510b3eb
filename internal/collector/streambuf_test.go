package collector

import (
	"context"
	"net"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/qtop-dev/qtop/internal/connlimit"
)

// shrinkSendBuffer sets a live stream's connection's send buffer to
// streamSendBuffer (the kernel doubles what it is given), so a client
// that never reads fills it within a few events and is dropped by the
// write timeout, not after tens of minutes.
func TestStreamSendBufferShrunk(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	sndbuf := func() int {
		rc, err := server.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var serr error
		rc.Control(func(fd uintptr) { n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF) })
		if serr != nil {
			t.Fatal(serr)
		}
		return n
	}
	before := sndbuf()
	r := httptest.NewRequest("GET", "/v1/live/stream", nil)
	// As the HTTP port serves it: under the connection bound.
	r = r.WithContext(withConn(context.Background(), &connlimit.Conn{Conn: server}))
	shrinkSendBuffer(r)
	if got := sndbuf(); got > 2*streamSendBuffer || got >= before {
		t.Fatalf("send buffer %d after shrinking (was %d), want at most %d", got, before, 2*streamSendBuffer)
	}
}
