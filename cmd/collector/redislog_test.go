package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestRedisClientLogsStructured: while Redis cannot be reached (here a
// TLS Redis whose CA the collector was not given), the log with
// --log-format json stays JSON, one object a line: the Redis client's own
// complaints go through the collector's logger, not as raw lines on
// stderr every second.
func TestRedisClientLogsStructured(t *testing.T) {
	sec := testsvc.RedisSecure(t)
	bin := buildCollector(t)
	t.Setenv("QTOP_REDIS_USER", sec.User)
	t.Setenv("QTOP_REDIS_PASSWORD", sec.Password)
	cmd, logs := startCollector(t, bin, "--listen", freePort(t), "--store", "none", "--data-dir", t.TempDir(),
		"--quota-redis", "rediss://"+sec.Addr)
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	// The collector's own warning comes after the client gave up dialling
	// (and, unfixed, printed its line).
	if !waitUntil(60*time.Second, func() bool { return strings.Contains(logs.String(), "quota sums not exchanged") }) {
		t.Fatalf("no warning that Redis is unreachable:\n%s", logs.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a log line is not JSON: %s", line)
		}
	}
	if strings.Contains(logs.String(), sec.Password) {
		t.Error("the log shows the Redis password")
	}
}
