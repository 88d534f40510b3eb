package connlimit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// chanListener hands out the conns sent to it.
type chanListener struct {
	conns chan net.Conn
}

func (l chanListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l chanListener) Close() error   { return nil }
func (l chanListener) Addr() net.Addr { return &net.TCPAddr{} }

// At its bound a Listener closes the connection idle the
// longest to make room for a new one (one in a request is never closed),
// and with none idle closes the new one; a connection gives its place back
// once, however often it is closed.
func TestListener(t *testing.T) {
	var gauge int
	closedBy := map[string]int{}
	in := chanListener{conns: make(chan net.Conn, 1)}
	l := New(in, 2, Hooks{Opened: func(d int) { gauge += d }, Closed: func(reason string, _ net.Addr) { closedBy[reason]++ }})
	// arrive hands a new connection to the listener and returns the
	// client's end and what Accept returned.
	arrive := func() (net.Conn, *Conn) {
		t.Helper()
		client, server := net.Pipe()
		in.conns <- server
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return client, c.(*Conn)
	}
	// closed: the client's end reads EOF once the server's end is closed
	// (and times out while it is open).
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if err != io.EOF && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read: %v", err)
		}
		return err == io.EOF
	}
	counts := func() (open, opened, idle, refused int) {
		return l.Open(), gauge, closedBy["idle"], closedBy["refused"]
	}

	a, la := arrive()
	b, lb := arrive()
	l.ConnState(lb, http.StateActive) // b is in a request; a waits for its first
	c, lc := arrive()                 // at the bound: a, idle the longest, makes room
	if !closed(a) || closed(b) || closed(c) {
		t.Fatal("a should have been closed for c, and only a")
	}
	la.Close() // the server closes a too: its place is not given back twice
	if o, g, i, r := counts(); o != 2 || g != 2 || i != 1 || r != 0 {
		t.Fatalf("open %d, gauge %v, idle closed %v, refused %v", o, g, i, r)
	}
	// b, then c, between requests: b is idle the longer and goes first.
	l.ConnState(lb, http.StateIdle)
	l.ConnState(lc, http.StateActive)
	l.ConnState(lc, http.StateIdle)
	d, ld := arrive()
	if !closed(b) || closed(c) || closed(d) {
		t.Fatal("b, idle the longest, should have been closed for d, and only b")
	}
	// Every connection in a request: a new one is closed at once.
	l.ConnState(lc, http.StateActive)
	l.ConnState(ld, http.StateActive)
	e, server := net.Pipe()
	in.conns <- server
	close(in.conns)
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept: %v", err)
	}
	if !closed(e) {
		t.Fatal("e should have been closed at once")
	}
	if o, g, i, r := counts(); o != 2 || g != 2 || i != 2 || r != 1 {
		t.Fatalf("open %d, gauge %v, idle closed %v, refused %v", o, g, i, r)
	}
	lc.Close()
	ld.Close()
	ld.Close()
	if o, g, _, _ := counts(); o != 0 || g != 0 || l.idle.Len() != 0 {
		t.Fatalf("open %d, gauge %v, idle list %d after every close", o, g, l.idle.Len())
	}
}

// A Conn passes on what net/http and the gate ask of a TCP connection: a
// half close (the client reads the answer, then EOF, rather than a reset)
// and the raw connection.
func TestConnPassesTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, 1, Hooks{})
	defer l.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.(syscall.Conn).SyscallConn(); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("answer"))
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(client); err != nil || string(b) != "answer" {
		t.Fatalf("client read %q, %v", b, err)
	}
	client.Write([]byte("x")) // the connection still reads after the half close
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}
