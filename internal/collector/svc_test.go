package collector

import (
	"net"
	"testing"
	"time"
)

// waitClickHouse waits (up to 90 s) until the shared ClickHouse accepts
// connections: another package's outage test stops and restarts it, and
// `go test ./...` runs packages side by side.
func waitClickHouse(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClickHouse at %s does not answer: %v", addr, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
