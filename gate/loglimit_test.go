package gate

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A warning of one kind is logged at most once a second, the next line
// saying how many were left out; kinds are limited apart. Fake time.
func TestWarningsLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		var w warnings
		for range 5 {
			w.warn(log, "failed", "gate: upstream failed")
		}
		w.warn(log, "timeout", "gate: upstream timed out")
		time.Sleep(time.Second)
		w.warn(log, "failed", "gate: upstream failed")
		w.warn(log, "failed", "gate: upstream failed") // left out, then said at shutdown
		w.flush(log)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 4 || strings.Contains(lines[0], "suppressed") || !strings.Contains(lines[2], "suppressed=4") ||
			!strings.Contains(lines[3], "kind=failed suppressed=1") {
			t.Errorf("logged:\n%s", buf.String())
		}
	})
}
