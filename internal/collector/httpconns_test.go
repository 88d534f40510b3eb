package collector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// At its bound the HTTP port's listener closes the connection idle the
// longest to make room for a new one (one in a request is never closed),
// and with none idle closes the new one; a connection gives its place back
// once, however often it is closed.
func TestConnLimit(t *testing.T) {
	m, err := newHTTPConnMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	in := chanListener{conns: make(chan net.Conn, 1)}
	l := limitHTTPConns(in, 2, m, slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return time.Unix(1e9, 0) })
	// arrive hands a new connection to the listener and returns the
	// client's end and what Accept returned.
	arrive := func() (net.Conn, *limitedConn) {
		t.Helper()
		client, server := net.Pipe()
		in.conns <- server
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return client, c.(*limitedConn)
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
	counts := func() (open int, gauge, idle, refused float64) {
		return l.open, testutil.ToFloat64(m.open), testutil.ToFloat64(m.closed.WithLabelValues("idle")), testutil.ToFloat64(m.closed.WithLabelValues("refused"))
	}

	a, la := arrive()
	b, lb := arrive()
	l.state(lb, http.StateActive) // b is in a request; a waits for its first
	c, lc := arrive()             // at the bound: a, idle the longest, makes room
	if !closed(a) || closed(b) || closed(c) {
		t.Fatal("a should have been closed for c, and only a")
	}
	la.Close() // the server closes a too: its place is not given back twice
	if o, g, i, r := counts(); o != 2 || g != 2 || i != 1 || r != 0 {
		t.Fatalf("open %d, gauge %v, idle closed %v, refused %v", o, g, i, r)
	}
	// b, then c, between requests: b is idle the longer and goes first.
	l.state(lb, http.StateIdle)
	l.state(lc, http.StateActive)
	l.state(lc, http.StateIdle)
	d, ld := arrive()
	if !closed(b) || closed(c) || closed(d) {
		t.Fatal("b, idle the longest, should have been closed for d, and only b")
	}
	// Every connection in a request: a new one is closed at once.
	l.state(lc, http.StateActive)
	l.state(ld, http.StateActive)
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
	// The warning is logged once a minute at most, with what to do.
	if n := strings.Count(logs.String(), "connections at their bound"); n != 1 || !strings.Contains(logs.String(), "--max-conns") {
		t.Errorf("log: %s", logs.String())
	}
}

// A collector whose HTTP port holds MaxConns connections that sent
// nothing still answers: the one idle the longest is closed for the new
// one. Before, connections that stayed took every file descriptor.
func TestHTTPPortFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Config{Store: StoreNone, DataDir: t.TempDir(), Registerer: reg, IntakeConfig: IntakeConfig{MaxConns: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	var idle []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %s", resp.Status)
	}
	// The first connection, idle the longest, was closed for it.
	idle[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the first idle connection: %v, want EOF", err)
	}
	if got := counter(t, reg, "qtop_collector_http_connections_closed_total"); got != 1 {
		t.Errorf("closed: %v, want 1 (the idle one)", got)
	}
}
