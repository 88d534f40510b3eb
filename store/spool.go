package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Spool is a Store that keeps writes its next Store could not take in a
// bounded on-disk spool and replays them, oldest first, when next answers
// again. A spooled write returns nil: the rows are on disk and will be
// written. Until then Usage and History of a range with spooled minutes
// replay the spool first and, if rows of the range still wait, return
// ErrSpooled rather than sums that would leave them out.
//
// Each failed batch is one file, written atomically (temporary file,
// fsync, rename), so files left by a process that died are replayed by the
// next one opened on the same directory. When the spool would outgrow its
// cap the oldest files are dropped; dropped rows are counted on
// qtop_collector_dropped_rows_total{reason="spool_full"} and logged, never
// silently. A file that cannot be decoded is renamed to *.corrupt, reported
// and skipped.
//
// A batch the store refuses — as invalid (ErrInvalid), or with any error
// but ErrUnavailable DeadLetterAfter times in a row while the store answers
// Ping — is a poison batch (an unavailable part of the store, such as one
// shard of a cluster whose other nodes answer Ping, is an outage: the batch
// waits for it): writing it again cannot succeed, and retrying it first would hold
// every later batch behind it. It moves to a dead-letter file
// (*.rejected, in the spool's format, for an operator to inspect or
// replay), is counted on qtop_collector_dropped_rows_total{reason="rejected"}
// and in SpoolStats.DeadLetters, logged, and the queue moves on.
//
// Replays are at-least-once (a write whose reply was lost is written again),
// which the stores make harmless: their writes are idempotent.
type Spool struct {
	next Store
	dir  string
	cfg  spoolConfig

	mu      sync.Mutex
	files   []*spoolFile // pending, oldest first
	bytes   int64
	seq     uint64
	closed  bool
	warned  bool // logged that writes are being spooled, until the spool drains
	drainMu sync.Mutex

	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	dropped  *prometheus.CounterVec
	nDropped atomic.Uint64
	nDead    atomic.Uint64
	replayed prometheus.Counter
	spooled  prometheus.Counter
	size     prometheus.Gauge
}

var _ Store = (*Spool)(nil)

type spoolFile struct {
	seq      uint64
	size     int64
	rows     int
	kind     batchKind
	inflight bool
	since    time.Time // when the batch was spooled
	failures int       // replays refused while the store answered
	// first and last are the minutes of a rollup batch spooled by this
	// process; zero for one found at start (read as overlapping every
	// range: its minutes are not read until it is replayed).
	first, last time.Time
}

// DeadLetterAfter is how many times in a row a spooled batch may fail while
// the store answers Ping before it goes to a dead-letter file.
const DeadLetterAfter = 3

// DeadLetterSuffix ends the name of a dead-letter file in the spool folder.
const DeadLetterSuffix = ".rejected"

func (f *spoolFile) name() string { return fmt.Sprintf("%020d.spool", f.seq) }

// Drop reasons on qtop_collector_dropped_rows_total.
const (
	DropSpoolFull    = "spool_full"    // the spool reached its cap; the oldest batch went
	DropSpoolCorrupt = "spool_corrupt" // a spool file could not be decoded
	DropRejected     = "rejected"      // the store refused a replayed batch as invalid
)

// DefaultSpoolMaxBytes is the spool's size cap unless WithMaxBytes says otherwise.
const DefaultSpoolMaxBytes = 256 << 20

type spoolConfig struct {
	maxBytes     int64
	reg          prometheus.Registerer
	log          *slog.Logger
	minRetry     time.Duration
	maxRetry     time.Duration
	writeTimeout time.Duration
	closeTimeout time.Duration
	manual       bool // tests: no background replay, only Flush
}

// SpoolOption configures NewSpool.
type SpoolOption func(*spoolConfig)

// WithMaxBytes caps the spool's size on disk (default 256 MiB).
func WithMaxBytes(n int64) SpoolOption { return func(c *spoolConfig) { c.maxBytes = n } }

// WithRegisterer registers the spool's metrics on reg (default: none).
func WithRegisterer(reg prometheus.Registerer) SpoolOption {
	return func(c *spoolConfig) { c.reg = reg }
}

// WithLogger logs spooling, replays and drops to l (default: discarded).
func WithLogger(l *slog.Logger) SpoolOption { return func(c *spoolConfig) { c.log = l } }

// WithRetry sets the replay backoff: the first retry after min, doubling to max
// (default 500 ms to 30 s).
func WithRetry(min, max time.Duration) SpoolOption {
	return func(c *spoolConfig) { c.minRetry, c.maxRetry = min, max }
}

// WithWriteTimeout bounds each write to the next store, direct or replayed
// (default 30 s): a store that hangs is treated as down.
func WithWriteTimeout(d time.Duration) SpoolOption {
	return func(c *spoolConfig) { c.writeTimeout = d }
}

// WithCloseTimeout bounds how long Close tries to drain (default 10 s);
// what is left stays on disk for the next process.
func WithCloseTimeout(d time.Duration) SpoolOption {
	return func(c *spoolConfig) { c.closeTimeout = d }
}

// NewSpool wraps next with a spool in dir, created if missing. Files a
// previous process left in dir are replayed. The Spool owns next: Close
// closes it.
func NewSpool(next Store, dir string, opts ...SpoolOption) (*Spool, error) {
	cfg := spoolConfig{
		maxBytes:     DefaultSpoolMaxBytes,
		minRetry:     500 * time.Millisecond,
		maxRetry:     30 * time.Second,
		writeTimeout: 30 * time.Second,
		closeTimeout: 10 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case next == nil:
		return nil, errors.New("store: spool: next store is nil")
	case cfg.maxBytes <= 0:
		return nil, fmt.Errorf("store: spool: size cap %d must be positive", cfg.maxBytes)
	case cfg.minRetry <= 0 || cfg.maxRetry < cfg.minRetry:
		return nil, fmt.Errorf("store: spool: retry %v..%v must be positive and increasing", cfg.minRetry, cfg.maxRetry)
	case cfg.writeTimeout <= 0 || cfg.closeTimeout < 0:
		return nil, errors.New("store: spool: timeouts must be positive")
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	s := &Spool{
		next: next,
		dir:  dir,
		cfg:  cfg,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	if err := s.metrics(cfg.reg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: spool: %w", err)
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	if !cfg.manual {
		s.wg.Add(1)
		go s.run()
	}
	if len(s.files) > 0 {
		s.cfg.log.Info("spool: replaying batches left by an earlier run", "dir", dir, "files", len(s.files), "bytes", s.bytes)
		s.poke()
	}
	return s, nil
}

func (s *Spool) metrics(reg prometheus.Registerer) error {
	s.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qtop_collector_dropped_rows_total",
		Help: "Rows the collector dropped instead of storing, by reason.",
	}, []string{"reason"})
	s.replayed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_collector_spool_replayed_rows_total",
		Help: "Rows written to the store from the on-disk spool.",
	})
	s.spooled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_collector_spooled_rows_total",
		Help: "Rows put in the on-disk spool because the store did not take them.",
	})
	s.size = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qtop_collector_spool_bytes",
		Help: "Bytes waiting in the on-disk spool.",
	})
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{s.replayed, s.spooled, s.size} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("store: spool: metrics: %w", err)
		}
	}
	// The collector may count its own drops on the same family.
	if err := reg.Register(s.dropped); err != nil {
		are, ok := err.(prometheus.AlreadyRegisteredError)
		if !ok {
			return fmt.Errorf("store: spool: metrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return fmt.Errorf("store: spool: metrics: %w", err)
		}
		s.dropped = existing
	}
	// Every reason's series from the start: a rate reads 0, not nothing,
	// and the first drop is an increase from 0.
	for _, reason := range []string{DropSpoolFull, DropSpoolCorrupt, DropRejected} {
		s.dropped.WithLabelValues(reason)
	}
	return nil
}

// load lists what an earlier process left: temporary files are half-written
// batches that were never acknowledged as spooled, so they go; unreadable
// files are quarantined.
func (s *Spool) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("store: spool: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".spool.tmp"):
			os.Remove(filepath.Join(s.dir, name))
		case strings.HasSuffix(name, ".spool"):
			seq, err := strconv.ParseUint(strings.TrimSuffix(name, ".spool"), 10, 64)
			if err != nil {
				continue // not ours
			}
			f := &spoolFile{seq: seq}
			if err := s.readHeader(f); err != nil {
				s.quarantine(f, err)
				continue
			}
			s.files = append(s.files, f)
			s.bytes += f.size
		}
	}
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].seq < s.files[j].seq })
	if n := len(s.files); n > 0 {
		s.seq = s.files[n-1].seq
	}
	s.size.Set(float64(s.bytes))
	return nil
}

func (s *Spool) readHeader(f *spoolFile) error {
	fh, err := os.Open(filepath.Join(s.dir, f.name()))
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, headerLen)
	n, _ := io.ReadFull(fh, buf)
	h, err := decodeHeader(buf[:n])
	if err != nil {
		return err
	}
	if int64(h.payloadLen+headerLen) != st.Size() {
		return fmt.Errorf("%w: file is %d bytes, header says %d", ErrSpoolCorrupt, st.Size(), h.payloadLen+headerLen)
	}
	f.size, f.rows, f.kind, f.since = st.Size(), h.rows, h.kind, st.ModTime()
	return nil
}

// quarantine renames a bad file out of the replay and reports it.
func (s *Spool) quarantine(f *spoolFile, cause error) {
	path := filepath.Join(s.dir, f.name())
	if err := os.Rename(path, path+".corrupt"); err != nil {
		os.Remove(path)
	}
	if f.rows > 0 {
		s.drop(DropSpoolCorrupt, f.rows)
	}
	s.cfg.log.Error("spool: corrupt file skipped", "file", path+".corrupt", "rows", f.rows, "err", cause)
}

// deadLetter moves a poison batch out of the queue into a dead-letter file
// and reports it. data, when not nil, is the batch encoded (a direct write
// that was never spooled); otherwise f's file is renamed.
func (s *Spool) deadLetter(f *spoolFile, data []byte, kind batchKind, rows int, cause error) {
	var path string
	if data != nil {
		s.mu.Lock()
		s.seq++
		path = filepath.Join(s.dir, fmt.Sprintf("%020d.spool", s.seq)+DeadLetterSuffix)
		s.mu.Unlock()
		if err := WriteFileAtomic(path, data); err != nil {
			s.cfg.log.Error("spool: dead-letter file not written", "file", path, "err", err)
		}
	} else {
		path = filepath.Join(s.dir, f.name())
		if err := os.Rename(path, path+DeadLetterSuffix); err != nil {
			os.Remove(path)
		}
		path += DeadLetterSuffix
	}
	s.drop(DropRejected, rows)
	s.nDead.Add(1)
	s.cfg.log.Error("spool: the store refused a batch; moved to a dead-letter file, the queue moves on",
		"kind", kind.String(), "rows", rows, "file", path, "err", cause)
}

// WriteRollups implements Store.
func (s *Spool) WriteRollups(ctx context.Context, rows []Rollup) error {
	if err := ValidateRollups(rows); err != nil || len(rows) == 0 {
		return err
	}
	return s.write(ctx, &batch{kind: kindRollups, rollups: rows}, func(ctx context.Context) error {
		return s.next.WriteRollups(ctx, rows)
	})
}

// WriteHotKeys implements Store.
func (s *Spool) WriteHotKeys(ctx context.Context, rows []HotKey) error {
	if err := ValidateHotKeys(rows); err != nil || len(rows) == 0 {
		return err
	}
	return s.write(ctx, &batch{kind: kindHotKeys, hotKeys: rows}, func(ctx context.Context) error {
		return s.next.WriteHotKeys(ctx, rows)
	})
}

// WriteStatements implements Store.
func (s *Spool) WriteStatements(ctx context.Context, rows []Statement) error {
	if err := ValidateStatements(rows); err != nil || len(rows) == 0 {
		return err
	}
	return s.write(ctx, &batch{kind: kindStatements, statements: rows}, func(ctx context.Context) error {
		return s.next.WriteStatements(ctx, rows)
	})
}

// WriteAudit implements Store.
func (s *Spool) WriteAudit(ctx context.Context, rows []Audit) error {
	if err := ValidateAudit(rows); err != nil || len(rows) == 0 {
		return err
	}
	return s.write(ctx, &batch{kind: kindAudit, audit: rows}, func(ctx context.Context) error {
		return s.next.WriteAudit(ctx, rows)
	})
}

// write tries next directly when nothing is waiting, and spools otherwise
// or when next fails, so a down store is not hit with every batch and
// batches stay roughly in order.
func (s *Spool) write(ctx context.Context, b *batch, direct func(context.Context) error) error {
	s.mu.Lock()
	closed, pending := s.closed, len(s.files)
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if pending == 0 {
		dctx, cancel := context.WithTimeout(ctx, s.cfg.writeTimeout)
		err := direct(dctx)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrInvalid) {
			// Spooling would not make it valid: keep it aside.
			if data, eerr := encodeBatch(b); eerr == nil {
				s.deadLetter(nil, data, b.kind, b.rows(), err)
			}
			return err
		}
		s.mu.Lock()
		if !s.warned {
			s.warned = true
			s.cfg.log.Warn("spool: store write failed; spooling until it answers", "kind", b.kind.String(), "rows", b.rows(), "err", err)
		}
		s.mu.Unlock()
	}
	data, err := encodeBatch(b)
	if err != nil {
		return err
	}
	return s.append(b, data)
}

func (s *Spool) append(b *batch, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	size := int64(len(data))
	if size > s.cfg.maxBytes {
		s.drop(DropSpoolFull, b.rows())
		s.cfg.log.Error("spool: batch larger than the whole spool dropped", "kind", b.kind.String(), "rows", b.rows(), "bytes", size, "max_bytes", s.cfg.maxBytes)
		return nil
	}
	for s.bytes+size > s.cfg.maxBytes {
		i := 0
		for i < len(s.files) && s.files[i].inflight {
			i++
		}
		if i == len(s.files) {
			break // only a batch being replayed is left; it goes in a moment
		}
		old := s.files[i]
		os.Remove(filepath.Join(s.dir, old.name()))
		s.files = append(s.files[:i], s.files[i+1:]...)
		s.bytes -= old.size
		s.drop(DropSpoolFull, old.rows)
		s.cfg.log.Error("spool: full, oldest batch dropped", "kind", old.kind.String(), "rows", old.rows, "bytes", old.size, "max_bytes", s.cfg.maxBytes)
	}
	s.seq++
	f := &spoolFile{seq: s.seq, size: size, rows: b.rows(), kind: b.kind, since: time.Now()}
	for i, r := range b.rollups {
		if i == 0 || r.Minute.Before(f.first) {
			f.first = r.Minute
		}
		if i == 0 || r.Minute.After(f.last) {
			f.last = r.Minute
		}
	}
	if err := WriteFileAtomic(filepath.Join(s.dir, f.name()), data); err != nil {
		s.seq--
		return fmt.Errorf("store: spool: %w", err)
	}
	s.files = append(s.files, f)
	s.bytes += size
	s.size.Set(float64(s.bytes))
	s.spooled.Add(float64(f.rows))
	if len(s.files) == 1 {
		s.poke()
	}
	return nil
}

// WriteFileAtomic writes data to path so that a crash leaves the old file
// or the new one, never a part: a temporary file beside it, fsync,
// rename, fsync of the folder. The new file keeps the owner, group and
// permissions of the one it replaces (a new one is 0600, the writer's).
// The spool, its erasure and the collector's erasure of the write-ahead
// log write through it.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = keepOwner(fh, path)
	if err == nil {
		_, err = fh.Write(data)
	}
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func (s *Spool) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run replays in the background: at once when a batch is spooled, then
// with doubling backoff while next keeps failing.
func (s *Spool) run() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	backoff := s.cfg.minRetry
	for {
		select {
		case <-s.stop:
			timer.Stop()
			return
		case <-s.kick:
		case <-timer.C:
		}
		if err := s.drain(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			timer.Reset(backoff)
			backoff = min(2*backoff, s.cfg.maxRetry)
			continue
		}
		backoff = s.cfg.minRetry
	}
}

func (s *Spool) drop(reason string, rows int) {
	s.dropped.WithLabelValues(reason).Add(float64(rows))
	s.nDropped.Add(uint64(rows))
}

// SpoolStats is a snapshot of the spool for status pages.
type SpoolStats struct {
	PendingRows int    // rows waiting on disk
	Bytes       int64  // their size on disk
	DroppedRows uint64 // rows dropped since NewSpool (all reasons)
	// DeadLetters counts batches moved to dead-letter files since NewSpool.
	DeadLetters uint64
	// Oldest is when the oldest waiting batch was spooled (zero when
	// nothing waits): a spool that is not draining has an old one.
	Oldest time.Time
	// Failing says a write to the store failed since the spool last
	// drained, and rows wait: the store is not taking writes now.
	Failing bool
}

// Stats returns what is waiting and what was dropped.
func (s *Spool) Stats() SpoolStats {
	st := SpoolStats{DroppedRows: s.nDropped.Load(), DeadLetters: s.nDead.Load()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		st.PendingRows += f.rows
	}
	st.Bytes = s.bytes
	if len(s.files) > 0 {
		st.Oldest = s.files[0].since
		st.Failing = s.warned
	}
	return st
}

// Pending returns the rows and bytes waiting in the spool.
func (s *Spool) Pending() (rows int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		rows += f.rows
	}
	return rows, s.bytes
}

// Flush replays what it can until the spool is empty, next fails, or ctx
// ends; it returns nil only when the spool is empty.
func (s *Spool) Flush(ctx context.Context) error {
	return s.drain(ctx)
}

func (s *Spool) drain(ctx context.Context) error {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("store: spool: %w", err)
		}
		s.mu.Lock()
		if len(s.files) == 0 {
			if s.warned {
				s.warned = false
				s.cfg.log.Info("spool: drained; writing to the store directly again")
			}
			s.mu.Unlock()
			return nil
		}
		f := s.files[0]
		f.inflight = true
		s.mu.Unlock()

		err := s.replay(ctx, f)

		if err != nil && !errors.Is(err, ErrSpoolCorrupt) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			// The store answers but refuses this batch: after
			// DeadLetterAfter tries it is a poison batch, not an outage.
			pctx, cancel := context.WithTimeout(ctx, s.cfg.writeTimeout)
			if s.next.Ping(pctx) == nil {
				f.failures++
				if f.failures >= DeadLetterAfter {
					s.deadLetter(f, nil, f.kind, f.rows, err)
					err = nil
				}
			}
			cancel()
		}
		s.mu.Lock()
		f.inflight = false
		if err != nil && !errors.Is(err, ErrSpoolCorrupt) && !errors.Is(err, ErrInvalid) {
			s.warned = true // failing (Stats) until it drains
			s.mu.Unlock()
			return err
		}
		os.Remove(filepath.Join(s.dir, f.name()))
		for i := range s.files {
			if s.files[i] == f {
				s.files = append(s.files[:i], s.files[i+1:]...)
				s.bytes -= f.size
				break
			}
		}
		s.size.Set(float64(s.bytes))
		s.mu.Unlock()
	}
}

// replay writes one file to next. A corrupt file is quarantined and a batch
// next rejects as invalid is dropped (both counted and logged), returning
// their errors so drain moves past them.
func (s *Spool) replay(ctx context.Context, f *spoolFile) error {
	path := filepath.Join(s.dir, f.name())
	data, err := os.ReadFile(path)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrSpoolCorrupt, err)
		s.quarantine(f, err)
		return err
	}
	b, err := decodeBatch(data)
	if err != nil {
		s.quarantine(f, err)
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.writeTimeout)
	defer cancel()
	switch b.kind {
	case kindRollups:
		err = s.next.WriteRollups(wctx, b.rollups)
	case kindHotKeys:
		err = s.next.WriteHotKeys(wctx, b.hotKeys)
	case kindStatements:
		err = s.next.WriteStatements(wctx, b.statements)
	case kindAudit:
		err = s.next.WriteAudit(wctx, b.audit)
	}
	if errors.Is(err, ErrInvalid) {
		s.deadLetter(f, nil, b.kind, b.rows(), err)
		return err
	}
	if err != nil {
		return fmt.Errorf("store: spool: replay %s: %w", b.kind, err)
	}
	s.replayed.Add(float64(b.rows()))
	return nil
}

// Usage implements Store: it reads next. Spooled rollups are not there
// yet, so when some of the range's minutes are spooled it first replays
// the spool, and if rows of the range are still waiting it returns
// ErrSpooled instead of sums that would leave them out.
func (s *Spool) Usage(ctx context.Context, from, to time.Time, byRoute bool) ([]Usage, error) {
	if err := s.readable(ctx, from, to); err != nil {
		return nil, err
	}
	return s.next.Usage(ctx, from, to, byRoute)
}

// History implements Store: it reads next, as Usage does (ErrSpooled while
// minutes of the range wait in the spool).
func (s *Spool) History(ctx context.Context, tenant string, from, to time.Time) ([]Rollup, error) {
	if err := s.readable(ctx, from, to); err != nil {
		return nil, err
	}
	return s.next.History(ctx, tenant, from, to)
}

// readable returns nil when no spooled rollup has a minute in [from, to),
// after replaying the spool once if one has; otherwise ErrSpooled, naming
// the rows and minutes still waiting.
func (s *Spool) readable(ctx context.Context, from, to time.Time) error {
	if rows, _, _ := s.spooledIn(from, to); rows == 0 {
		return nil
	}
	derr := s.drain(ctx)
	rows, first, last := s.spooledIn(from, to)
	if rows == 0 {
		return nil
	}
	span := "of minutes spooled before this start"
	if !first.IsZero() {
		span = fmt.Sprintf("of minutes %s to %s", first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: %d rows %s wait in the spool for the store (%v); reading now would leave them out", ErrSpooled, rows, span, derr)
}

// spooledIn counts the spooled rollup rows of batches with a minute in
// [from, to) (or whose minutes are unknown), with the span of the known.
func (s *Spool) spooledIn(from, to time.Time) (rows int, first, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if f.kind != kindRollups {
			continue
		}
		if f.first.IsZero() {
			rows += f.rows
			continue
		}
		if f.last.Before(from) || !f.first.Before(to) {
			continue
		}
		rows += f.rows
		if first.IsZero() || f.first.Before(first) {
			first = f.first
		}
		if f.last.After(last) {
			last = f.last
		}
	}
	return rows, first, last
}

// Ping implements Store: it pings next.
func (s *Spool) Ping(ctx context.Context) error { return s.next.Ping(ctx) }

// Close stops the replay, drains what it can within the close timeout,
// closes next, and leaves whatever remains on disk for the next process.
// Calls after Close return ErrClosed.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	var err error
	if s.cfg.closeTimeout > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.closeTimeout)
		err = s.drain(ctx)
		cancel()
	}
	if rows, bytes := s.Pending(); rows > 0 {
		s.cfg.log.Warn("spool: rows left on disk for the next start", "dir", s.dir, "rows", rows, "bytes", bytes, "err", err)
		err = nil // kept, not lost
	}
	return errors.Join(err, s.next.Close())
}
