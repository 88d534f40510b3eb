package collector

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A collector whose HTTP port holds MaxConns connections that sent
// nothing still answers: the one idle the longest is closed for the new
// one. Before, connections that stayed took every file descriptor.
func TestHTTPPortFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Config{Store: StoreNone, DataDir: t.TempDir(), Registerer: reg, Listen: "127.0.0.1:0", IntakeConfig: IntakeConfig{MaxConns: 4}})
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
