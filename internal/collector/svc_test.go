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
	var err error
	waitFor(t, 90*time.Second, "ClickHouse at "+addr+" to answer", func() bool {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
		}
		return err == nil
	})
}

// waitFor checks cond every 10 ms until it holds, and fails the test
// naming what it waited for when it does not hold within d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !waitUntil(d, cond) {
		t.Fatalf("waited %v for %s", d, what)
	}
}

// waitUntil checks cond every 10 ms until it holds (true) or d has passed
// (false). It is for conditions outside the test's control — a real
// server, another process, a goroutine blocked on a lock; what runs on the
// collector's own clock is driven with a fake one instead.
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
