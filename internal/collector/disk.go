package collector

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// A full disk degrades the collector instead of wedging it.
//
// DataDir holds the write-ahead log, the spool and the policy. The disk
// guard keeps Config.DiskReserve bytes free there: when the free space
// falls below it, reports (POST /v1/reports, and OTLP through Consume)
// are refused with 503 and Retry-After before they are read, let alone
// logged, so nothing acknowledged is lost and the reserve stays for what
// must still be written — the closed minutes going to the spool, the
// policy. When space comes back the guard notices at its next look (every
// tick, and at every report while the free space is near the reserve)
// and reports are taken again, without a restart; a minute that could not
// be spooled meanwhile is written at the next tick (emit.go).
//
// Each change of state is logged once; qtop_collector_disk_degraded and
// qtop_collector_disk_free_bytes say it on /metrics, and /readyz answers
// 503 with the reason while the collector refuses for disk, cannot create
// a file in its log's folder, holds a full spool of a store it cannot
// reach, or has not yet read its shared policy. /healthz stays liveness.

// errDiskReserve refuses a report while the free space is below the
// reserve (a kind of errWAL: 503 with Retry-After).
var errDiskReserve = fmt.Errorf("%w: the data directory's disk is below its free-space reserve", errWAL)

// diskRetry is the Retry-After of a report refused for disk.
const diskRetry = 5 * time.Second

// diskGuard watches the free space of DataDir. Its methods are safe for
// concurrent use; a nil guard admits everything.
type diskGuard struct {
	dir, walDir string
	reserve     int64
	free        func(dir string) (int64, error) // freeBytes; tests pass their own
	log         *slog.Logger

	estimate atomic.Int64 // free bytes at the last look, less what was admitted since
	degraded atomic.Bool

	mu      sync.Mutex // serialises looks and state changes
	looks   int
	walErr  string
	statErr string

	degradedG prometheus.Gauge
	freeG     prometheus.Gauge
	refused   prometheus.Counter
}

func newDiskGuard(cfg Config, walDir string) (*diskGuard, error) {
	g := &diskGuard{dir: cfg.DataDir, walDir: walDir, reserve: cfg.DiskReserve, free: freeBytes, log: cfg.Logger,
		degradedG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_disk_degraded",
			Help: "1 while reports are refused because the data directory's free space is below the reserve"}),
		freeG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_disk_free_bytes",
			Help: "Free bytes on the data directory's file system at the last look"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_disk_refused_total",
			Help: "Reports refused because the data directory's free space was below the reserve"}),
	}
	for _, c := range []prometheus.Collector{g.degradedG, g.freeG, g.refused} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	return g, nil
}

// look reads the free space and changes state when it crossed the
// reserve (logged once per change). Every fifth look also checks that a
// file can be created in the log's folder.
func (g *diskGuard) look() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := g.free(g.dir)
	switch {
	case err != nil && g.statErr == "":
		g.statErr = err.Error()
		g.log.Warn("disk: cannot read the data directory's free space; the reserve is not kept", "err", err)
	case err == nil:
		g.statErr = ""
		g.estimate.Store(free)
		g.freeG.Set(float64(free))
		g.setDegraded(g.reserve > 0 && free < g.reserve, free)
	}
	if g.looks%5 == 0 {
		g.probeWAL()
	}
	g.looks++
}

// setDegraded changes the state, logging the change. g.mu is held.
func (g *diskGuard) setDegraded(d bool, free int64) {
	if g.degraded.Load() == d {
		return
	}
	g.degraded.Store(d)
	if d {
		g.degradedG.Set(1)
		g.log.Error("disk: free space below the reserve; refusing reports until space comes back",
			"dir", g.dir, "free_bytes", free, "reserve_bytes", g.reserve,
			"hint", "free space on this disk, or lower --disk-reserve (QTOP_DISK_RESERVE) if it is larger than the disk can spare")
		return
	}
	g.degradedG.Set(0)
	g.log.Info("disk: free space above the reserve again; taking reports", "dir", g.dir, "free_bytes", free)
}

// probeWAL creates and removes a file in the log's folder. g.mu is held.
func (g *diskGuard) probeWAL() {
	f, err := os.CreateTemp(g.walDir, ".probe-*")
	if err == nil {
		name := f.Name()
		f.Close()
		err = os.Remove(name)
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != g.walErr {
		if msg != "" {
			g.log.Error("disk: the write-ahead log's folder is not writable", "err", err)
		} else {
			g.log.Info("disk: the write-ahead log's folder is writable again")
		}
		g.walErr = msg
	}
}

// admit returns errDiskReserve (retryable) when a report of n bytes may
// not be logged. Far above the reserve it costs an atomic add; near it,
// a look at the file system per report.
func (g *diskGuard) admit(n int64) error {
	if g == nil || g.reserve <= 0 {
		return nil
	}
	if g.estimate.Add(-n) < 2*g.reserve {
		g.look()
	}
	if g.degraded.Load() {
		g.refused.Inc()
		return report.NewRetryable(errDiskReserve, diskRetry)
	}
	return nil
}

// door refuses reports while the disk is below its reserve, before their
// bodies are read, with reject (a report's reply, which a reporter logs,
// counted as qtop_collector_reports_rejected_total{reason="disk"}).
func (g *diskGuard) door(h http.HandlerFunc, reject func(w http.ResponseWriter, status int, reason, msg string, retry time.Duration)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 || n > report.MaxReportBytes {
			n = report.MaxReportBytes
		}
		if r.Method == http.MethodPost && g.admit(n+8) != nil {
			reject(w, http.StatusServiceUnavailable, reasonDisk, errDiskReserve.Error(), diskRetry)
			return
		}
		h(w, r)
	}
}

// notReady lists why the collector should not get traffic now.
func (g *diskGuard) notReady() []string {
	if g == nil {
		return nil
	}
	var out []string
	if g.degraded.Load() {
		out = append(out, fmt.Sprintf("refusing reports: free space on the data directory below the reserve (%d bytes)", g.reserve))
	}
	g.mu.Lock()
	if g.walErr != "" {
		out = append(out, "the write-ahead log is not writable: "+g.walErr)
	}
	g.mu.Unlock()
	return out
}

// readyHandler serves /readyz: 200 "ok", or 503 with every reason. The
// probe needs no credential, so the store's own error (its address, its
// user) is said only to a caller with the read token; the log has it too.
func readyHandler(s *Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reasons := s.disk.notReady()
		if s.boot.pending.Load() {
			reasons = append(reasons, s.boot.status())
		}
		_, authErr := s.Authorize(r, RoleRead)
		reasons = append(reasons, s.em.notReady(s.cfg.SpoolMaxBytes, authErr == nil)...)
		if f := s.fleet; f != nil && f.shared && !f.polled.Load() {
			reasons = append(reasons, "the shared policy has not been read from the store yet")
		}
		if len(reasons) > 0 {
			writeError(w, http.StatusServiceUnavailable, strings.Join(reasons, "; "), 0)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	}
}

// notReady says whether the store is unreachable while the spool is at
// its limit (max: Config.SpoolMaxBytes, 0 for the spool's default), with
// the store's error when detail.
func (e *emitter) notReady(max int64, detail bool) []string {
	if e.spool == nil {
		return nil
	}
	if max <= 0 {
		max = store.DefaultSpoolMaxBytes
	}
	e.mu.Lock()
	storeErr := e.storeErr
	e.mu.Unlock()
	if st := e.spool.Stats(); storeErr != "" && st.Bytes >= max*9/10 {
		if !detail {
			storeErr = "its error is in the log and in /readyz with the read token"
		}
		return []string{fmt.Sprintf("the store is unreachable (%s) and the spool is full (%d of %d bytes)", storeErr, st.Bytes, max)}
	}
	return nil
}
