package gate

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// warnEvery is how often the gate logs a warning of one kind at most: an
// upstream down fails every request, and a line each would bury the log
// (the counts are in the metrics). The next line says how many were left
// out.
const warnEvery = time.Second

// warnings limits the gate's per-request warnings, by kind.
type warnings struct {
	mu   sync.Mutex
	last map[string]time.Time
	left map[string]int
}

// warn logs msg with args through log unless a warning of kind was
// logged less than warnEvery ago; then it counts it, for the next line's
// "suppressed".
func (w *warnings) warn(log *slog.Logger, kind, msg string, args ...any) {
	now := time.Now()
	w.mu.Lock()
	if w.last == nil {
		w.last, w.left = make(map[string]time.Time), make(map[string]int)
	}
	if now.Sub(w.last[kind]) < warnEvery {
		w.left[kind]++
		w.mu.Unlock()
		return
	}
	w.last[kind] = now
	n := w.left[kind]
	w.left[kind] = 0
	w.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Warn(msg, args...)
}

// flush logs, for each kind with warnings left out since its last line,
// how many (at shutdown: none go unsaid).
func (w *warnings) flush(log *slog.Logger) {
	w.mu.Lock()
	left := w.left
	w.left = nil
	w.last = nil
	w.mu.Unlock()
	for kind, n := range left {
		if n > 0 {
			log.Warn("gate: warnings left out since the last of their kind", "kind", kind, "suppressed", n)
		}
	}
}

// proxyLog is the ReverseProxy's error log: its lines at warn, limited as
// the gate's own, but for a body copy's read error, which the gate logs
// itself with the request's method and path (upstreamBroke).
func (g *Gate) proxyLog() *log.Logger {
	return log.New(proxyLines{g}, "", 0)
}

type proxyLines struct{ g *Gate }

func (p proxyLines) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	if !strings.Contains(line, "ReverseProxy read error during body copy") {
		p.g.warns.warn(p.g.log, "proxy", line)
	}
	return len(b), nil
}
