package gate_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/gate"
)

// A gate holding MaxConns connections that sent nothing still serves: the
// one idle the longest is closed for the new one, with either server
// (the gate's own, and net/http's). Before, connections that stayed took
// every file descriptor. With the gate's own server, connections that
// sent a byte of a head and nothing more are closed alike (before, they
// held their slots for the header timeout; net/http counts a connection
// busy from its first byte).
func TestConnectionsBounded(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	for _, c := range []struct {
		std  bool
		sent string
	}{{false, ""}, {true, ""}, {false, "G"}} {
		std := c.std
		reg := prometheus.NewRegistry()
		s := start(t, up.URL, gate.Config{MaxConns: 4, StdServer: std, Registerer: reg})
		var idle []net.Conn
		for range 4 {
			c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			idle = append(idle, c)
		}
		for _, i := range idle {
			if _, err := io.WriteString(i, c.sent); err != nil {
				t.Fatal(err)
			}
		}
		c := &http.Client{Transport: &http.Transport{}}
		if resp, body := get(t, c, s.base+"/x", "acme"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("std %v: %s %q", std, resp.Status, body)
		}
		c.CloseIdleConnections()
		idle[0].SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := idle[0].Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("std %v: the first idle connection: %v, want EOF (closed for the request)", std, err)
		}
		want := `
# HELP qtop_gate_connections_closed_total Client connections closed to stay within --max-conns, by reason: idle (the one idle the longest, to make room for a new one), refused (a new one, every other in a request).
# TYPE qtop_gate_connections_closed_total counter
qtop_gate_connections_closed_total{reason="idle"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_gate_connections_closed_total"); err != nil {
			t.Errorf("std %v: %v", std, err)
		}
	}
}

// After EndKeepAlives (the drain delay) the gate still serves, and each
// answer says "Connection: close" and closes its connection, with
// either server; before it, connections are kept.
func TestEndKeepAlives(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	for _, std := range []bool{false, true} {
		s := start(t, up.URL, gate.Config{StdServer: std})
		c := &http.Client{Transport: &http.Transport{}}
		defer c.CloseIdleConnections()
		if resp, _ := get(t, c, s.base+"/x", "acme"); resp.Close {
			t.Errorf("std %v: closed before EndKeepAlives", std)
		}
		s.g.EndKeepAlives()
		resp, body := get(t, c, s.base+"/x", "acme")
		if resp.StatusCode != 200 || body != "ok" || !resp.Close {
			t.Errorf("std %v: %s %q, Connection: close %v", std, resp.Status, body, resp.Close)
		}
	}
}
