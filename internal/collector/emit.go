package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
)

// emitter writes the rows of closed minutes to the store, through the
// on-disk spool, at versions above every one this writer used before,
// and watches the store's health. Its lock guards the version and the
// store's last error; the store and the spool are set once by New.
type emitter struct {
	store  store.Store  // the spool in front of the store; nil with StoreNone
	spool  *store.Spool // nil with StoreNone
	writer string
	dir    string // DataDir, where the last version is kept
	agg    *aggregator
	met    *metrics
	guard  *guardMetrics
	log    *slog.Logger
	now    func() time.Time
	dbt    *dbTimes // nil: the clients' DB time is kept (dbtime.go)

	mu       sync.Mutex
	version  uint64 // of the last emission (nextVersion)
	storeErr string
	writeErr string // the last write's error, logged once until it changes
}

// openStore opens cfg.Store behind its spool (nothing with StoreNone) and
// returns the store behind the spool, for the fleet's shared policy. A
// ClickHouse server that does not answer yet is opened later (lazyStore).
func (e *emitter) openStore(cfg Config) (next store.Store, err error) {
	e.version = loadVersion(cfg.DataDir)
	if cfg.Store == StoreNone {
		return nil, nil
	}
	open := cfg.OpenStore
	if open == nil {
		open = func(u string) (store.Store, error) { return OpenStore(context.Background(), u, cfg) }
	}
	next, err = open(cfg.Store)
	if err != nil {
		u, _ := store.ParseURL(cfg.Store)
		if u.Scheme != store.SchemeClickHouse || errors.Is(err, ErrConfig) || errors.Is(err, chstore.ErrConfig) {
			// A misspelt --cluster, a bad name: not an outage to wait out.
			return nil, err
		}
		if engineRefused(err) {
			// Not an outage: the store refuses the login or its certificate
			// is not trusted, and would until the configuration changes.
			// Starting anyway would look healthy while every minute piles
			// up in the spool.
			return nil, fmt.Errorf("%w: the store refused the collector: %w", ErrConfig, err)
		}
		// A server that is down now may answer later: start anyway,
		// log and acknowledge reports, and keep the minutes in the
		// spool until it does.
		e.log.Warn("store not reachable; starting anyway, rows wait in the spool", "store", redactStore(cfg.Store), "err", err)
		e.storeErr = err.Error()
		next = &lazyStore{log: e.log, now: cfg.Now, lastTry: cfg.Now(), lastErr: err,
			open: func(context.Context) (store.Store, error) { return open(cfg.Store) }}
	}
	opts := []store.SpoolOption{store.WithRegisterer(cfg.Registerer), store.WithLogger(e.log)}
	if cfg.SpoolMaxBytes > 0 {
		opts = append(opts, store.WithMaxBytes(cfg.SpoolMaxBytes))
	}
	e.spool, err = store.NewSpool(next, filepath.Join(cfg.DataDir, "spool"), opts...)
	if err != nil {
		next.Close()
		return nil, err
	}
	e.store = e.spool
	return next, nil
}

// nextVersion returns a rollup version above every one this writer used
// before, across restarts: it follows the clock, and never goes below the
// last version, which is kept in DataDir so a clock set back across a
// restart cannot make a re-emitted row lose to an older one.
func (e *emitter) nextVersion() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := max(e.version+1, uint64(e.now().UnixNano()))
	e.version = v
	p := filepath.Join(e.dir, versionFile)
	if err := os.WriteFile(p+".tmp", []byte(strconv.FormatUint(v, 10)), 0o600); err == nil {
		os.Rename(p+".tmp", p)
	}
	return v
}

const versionFile = "version"

func loadVersion(dir string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, versionFile))
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// emission is what one minute hands to the store.
type emission struct {
	m       *minute
	rollups []store.Rollup
	hotKeys []store.HotKey
	stmts   []store.Statement
}

// writeDue writes every changed minute of o whose grace has passed (all
// changed minutes when all is set), and drops minutes past the late
// horizon; mu guards o.
func (e *emitter) writeDue(ctx context.Context, mu *sync.Mutex, o *openMinutes, now time.Time, all bool) {
	mu.Lock()
	todo := o.due(now, all, e)
	mu.Unlock()
	e.writeAll(ctx, todo)
	// What the minutes took of PostgreSQL's time is kept before their
	// logs can go (a later tick, LateKeep on).
	e.dbt.save()
}

// writeAll writes the emissions; a minute not written is marked changed
// so the next tick tries again, unless the store refused it as invalid.
func (e *emitter) writeAll(ctx context.Context, todo []emission) {
	for _, em := range todo {
		err := e.write(ctx, em)
		if err != nil && !errors.Is(err, store.ErrInvalid) {
			em.m.dirty.Store(true) // before writing ends: the minute stays unwritten throughout
		}
		em.m.writing.Add(-1)
		switch {
		case err == nil:
		case errors.Is(err, store.ErrInvalid):
			// Writing again cannot make these rows valid; say so loudly.
			e.met.storeErrors.Inc()
			e.log.Error("store refused rows of a minute as invalid; they are not retried", "minute", em.m.start, "err", err)
		default:
			e.met.storeErrors.Inc()
			if e.noteWrite(err) {
				e.log.Error("minute not written; trying again every tick (logged again when the error changes)", "minute", em.m.start, "err", err)
			}
			continue
		}
		if e.noteWrite(nil) {
			e.log.Info("minutes written again", "minute", em.m.start)
		}
	}
}

// noteWrite records the outcome of a write and says whether it differs
// from the last one (a failing store or a full disk is logged when it
// starts, changes and ends, not every tick).
func (e *emitter) noteWrite(err error) bool {
	msg := ""
	if err != nil {
		// Without its numbers (file names, sizes, minutes), which change
		// at every try.
		msg = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return -1
			}
			return r
		}, err.Error())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	changed := msg != e.writeErr
	e.writeErr = msg
	return changed
}

// write hands one minute's rows to the store, table by table; an invalid
// table does not keep the others from being written.
func (e *emitter) write(ctx context.Context, em emission) error {
	var errs []error
	if err := e.store.WriteRollups(ctx, em.rollups); err != nil {
		errs = append(errs, err)
	} else {
		e.met.rollupsWritten.WithLabelValues("rollups").Add(float64(len(em.rollups)))
	}
	if err := e.store.WriteHotKeys(ctx, em.hotKeys); err != nil {
		errs = append(errs, err)
	} else {
		e.met.rollupsWritten.WithLabelValues("hot_keys").Add(float64(len(em.hotKeys)))
	}
	if err := e.store.WriteStatements(ctx, em.stmts); err != nil {
		errs = append(errs, err)
	} else {
		e.met.rollupsWritten.WithLabelValues("statements").Add(float64(len(em.stmts)))
	}
	for _, err := range errs {
		if !errors.Is(err, store.ErrInvalid) {
			return errors.Join(errs...) // retried: the writes are idempotent
		}
	}
	return errors.Join(errs...)
}

// build turns a minute into store rows at a new version and marks it
// clean. The server's lock is held (the minute's keys and statements).
func (e *emitter) build(m *minute) emission {
	v := e.nextVersion()
	m.writing.Add(1)     // until writeAll is done with it
	m.dirty.Store(false) // before the rows are read: see minute.dirty
	em := emission{m: m, rollups: make([]store.Rollup, 0, m.nrows.Load())}
	e.agg.rows(m, func(k rowKey, a *rowAgg) {
		r := store.Rollup{
			Minute: m.start, Writer: e.writer, Version: v,
			Service: k.service, Tenant: k.tenant, Route: k.route, Tier: a.tier(), Kind: k.kind.String(),
			Count: a.count, Errors: a.errors, DurationSeconds: a.dur, RU: a.ru,
			Bytes: a.bytes, Rows: a.rows, ActiveSessionSeconds: a.active,
			Latency: a.lat.Clone(),
		}
		if r.Tenant == "" && k.kind == report.KindPG {
			r.Tenant = "" // untagged sessions: the unattributed line of cost reports
		}
		em.rollups = append(em.rollups, r)
	})
	if e.dbt != nil {
		e.dbt.calibrate(m.start, em.rollups)
	}
	pgOverlap(em.rollups)
	if m.keys != nil {
		at := make(map[string]int)
		for _, c := range m.keys.Top(hotKeysPerMinute) {
			k := e.guard.cleanKey(c.Key)
			if i, dup := at[k]; dup { // two keys cut to the same prefix
				addSat(&em.hotKeys[i].Count, c.Count)
				addSat(&em.hotKeys[i].Err, c.Err)
				continue
			}
			at[k] = len(em.hotKeys)
			em.hotKeys = append(em.hotKeys, store.HotKey{
				Minute: m.start, Writer: e.writer, Version: v,
				Key: k, Tenant: m.keyTenants[c.Key], Count: c.Count, Err: c.Err,
			})
		}
	}
	for _, st := range m.stmts {
		em.stmts = append(em.stmts, st)
	}
	m.stmts = nil // statements are written once
	return em
}

// check pings the store and judges the spool (every 5 s of the tick).
func (e *emitter) check(ctx context.Context) {
	if e.store == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := e.store.Ping(pctx)
	cancel()
	// The spool's age is set whether the store answers or not: it grows
	// while the store is down, when it matters most.
	if stuck := e.spoolDraining(); err == nil {
		err = stuck
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.storeErr = err.Error()
		e.met.storeHealthy.Set(0)
	} else {
		e.storeErr = ""
		e.met.storeHealthy.Set(1)
	}
}

// spoolDraining returns an error when the spool holds a batch older than
// spoolStuckAfter: the store answers but the queue does not move.
func (e *emitter) spoolDraining() error {
	if e.spool == nil {
		return nil
	}
	st := e.spool.Stats()
	age, err := spoolStuck(st, time.Now())
	e.guard.spoolStuck.Set(age.Seconds())
	return err
}

// status adds the store's and the spool's state to the collector's.
func (e *emitter) status(cs *api.CollectorStatus) {
	e.mu.Lock()
	cs.StoreHealthy = e.store != nil && e.storeErr == ""
	cs.StoreError = e.storeErr
	e.mu.Unlock()
	if e.spool != nil {
		st := e.spool.Stats()
		cs.SpoolBytes, cs.DeadLetters = st.Bytes, st.DeadLetters
		if !st.Oldest.IsZero() {
			cs.SpoolOldestSeconds = time.Since(st.Oldest).Seconds()
		}
	}
}

// close flushes the spool (within ctx) and closes the store.
func (e *emitter) close(ctx context.Context) error {
	if e.spool == nil {
		return nil
	}
	if err := e.spool.Flush(ctx); err != nil {
		e.log.Warn("spool not empty at shutdown; kept on disk for the next start", "err", err)
	}
	return e.spool.Close()
}

// pgOverlap sets the DurationSeconds of a minute's "pg" rows (the
// sampler's active sessions) to the part of their active time that the
// minute's statement rows (kind "db": agents, OTLP statement spans)
// already count, so that a cost report counts it once (store.Usage: DB
// time is the statement rows' plus the sessions' time less that part).
// The sampler and the services see the same statements from two sides;
// the part they share is, for a tenant, at most the smaller of the two;
// for untagged sessions (an OTLP service whose sessions carry no tenant,
// or statements its agent sent without one), at most the untagged
// statement rows' time and what tenants' statement rows hold beyond their
// own sessions'. Each pg row takes its tenant's part in proportion to its
// active time. A tenant's DB time in a cost report is then the larger of
// the two sides, minute by minute, as the live view's DB load is
// (counts10.ratesFrom), and the untagged line keeps only sessions nothing
// accounts for, as the live view's untagged row does (untaggedOverlap).
func pgOverlap(rows []store.Rollup) {
	tenantOf := func(r *store.Rollup) string { // "" for every untagged name
		if untaggedTenant(r.Tenant) {
			return ""
		}
		return r.Tenant
	}
	db := make(map[string]float64)
	pg := make(map[string]float64)
	for i := range rows {
		r := &rows[i]
		t := tenantOf(r)
		switch r.Kind {
		case store.KindDB:
			db[t] += r.DurationSeconds
		case store.KindPG:
			pg[t] += r.ActiveSessionSeconds
		}
	}
	if len(pg) == 0 || len(db) == 0 {
		return
	}
	shared := make(map[string]float64, len(pg))
	var beyond float64 // tenants' statement time their own sessions do not show
	for t, d := range db {
		if t != "" {
			shared[t] = min(pg[t], d)
			beyond += max(0, d-pg[t])
		}
	}
	shared[""] = min(pg[""], db[""]+beyond)
	for i := range rows {
		r := &rows[i]
		if r.Kind != store.KindPG || r.ActiveSessionSeconds <= 0 {
			continue
		}
		if t := tenantOf(r); shared[t] > 0 {
			r.DurationSeconds = min(r.ActiveSessionSeconds, r.ActiveSessionSeconds*shared[t]/pg[t])
		}
	}
}
