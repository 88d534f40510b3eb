package main

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
	if !waitUntil(90*time.Second, func() bool { return dials(addr) }) {
		t.Fatalf("ClickHouse at %s does not answer", addr)
	}
}

func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// waitUntil checks cond every 10 ms until it holds (true) or d has passed
// (false). The tests here drive real child processes: they wait for what
// those do, never for a fixed time.
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-poll.C:
		}
	}
	return true
}
