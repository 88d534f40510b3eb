package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// sample is one second of one mode.
type sample struct {
	T          int     // seconds since the start
	Backlog    int64   // jobs enqueued and not done
	Done       int     // jobs done in the second
	P99Latency float64 // ms, enqueue to done, of the jobs done in the second
	P99Lock    float64 // ms, the SKIP LOCKED claim statement
	Dead       int64   // dead tuples left after the last vacuum
	Analytics  int64   // analytics statements running
	Refused    uint64  // analytics statements refused so far
	Warnings   uint64  // budget violations warned so far
}

type result struct {
	mode    string
	samples []sample
	// over the whole run
	p99Latency, p99Lock, maxLock float64
	analyticsDone                int64
	lat, lock                    []float64
}

// stats collects the measurements of the current second.
type stats struct {
	mu   sync.Mutex
	lat  []float64
	lock []float64
	all  []float64
	allL []float64
}

func (s *stats) add(lat, lock float64) {
	s.mu.Lock()
	s.lat = append(s.lat, lat)
	s.lock = append(s.lock, lock)
	s.mu.Unlock()
}

func (s *stats) cut() (lat, lock []float64) {
	s.mu.Lock()
	lat, lock = s.lat, s.lock
	s.lat, s.lock = nil, nil
	s.all = append(s.all, lat...)
	s.allL = append(s.allL, lock...)
	s.mu.Unlock()
	return lat, lock
}

func p99(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[(len(s)*99)/100]
}

func randomName() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "qtop_bq_" + hex.EncodeToString(b)
}

// modeRun is one mode's run: the pool, the job table, the budgets and
// what the producer, the workers, the analytics clients and the vacuum
// counted.
type modeRun struct {
	o       options
	pool    *pgxpool.Pool
	db      *pgxcomment.DB
	budgets *sqlcomment.Budgets
	table   string
	runCtx  context.Context
	wg      sync.WaitGroup
	errc    chan error
	st      stats

	produced, done, running, analyticsDone, dead atomic.Int64
	refused                                      atomic.Uint64
}

func runMode(ctx context.Context, o options, mode string) (result, error) {
	res := result{mode: mode}
	cfg, err := pgxpool.ParseConfig(o.dsn)
	if err != nil {
		return res, err
	}
	cfg.MaxConns = int32(o.workers + 8)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()

	r := &modeRun{o: o, pool: pool, table: randomName(), errc: make(chan error, 16)}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (
		id bigserial PRIMARY KEY,
		created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
		payload text NOT NULL
	) WITH (autovacuum_enabled = false)`, r.table)); err != nil {
		return res, err
	}
	defer pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+r.table)
	if r.budgets, err = modeBudgets(mode); err != nil {
		return res, err
	}
	r.db = pgxcomment.Wrap(pool, sqlcomment.WithApplication("budgetqueue"), sqlcomment.WithBudgets(r.budgets))

	runCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	r.runCtx = runCtx
	r.produce()
	r.work()
	r.analytics()
	r.vacuum()
	res.samples = r.sample()
	r.wg.Wait()
	select {
	case err := <-r.errc:
		return res, err
	default:
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	r.st.cut()
	res.p99Latency, res.p99Lock = p99(r.st.all), p99(r.st.allL)
	for _, v := range r.st.allL {
		res.maxLock = max(res.maxLock, v)
	}
	res.analyticsDone = r.analyticsDone.Load()
	return res, nil
}

// modeBudgets is the analytics budget of mode: none, warn or enforce.
func modeBudgets(mode string) (*sqlcomment.Budgets, error) {
	budgets := sqlcomment.NewBudgets(sqlcomment.WithBudgetLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if mode == "none" {
		return budgets, nil
	}
	m := policy.Enforce
	if mode == "warn" {
		m = policy.Warn
	}
	err := budgets.Set([]policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: m, Reason: "analytics statements hold back vacuum of the job queue"}}, nil)
	return budgets, err
}

// fail keeps the first errors of the run (not those of its end).
func (r *modeRun) fail(err error) {
	if err != nil && r.runCtx.Err() == nil {
		select {
		case r.errc <- err:
		default:
		}
	}
}

// produce inserts o.rate jobs a second, in 100 batches.
func (r *modeRun) produce() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		jobs := tenant.With(r.runCtx, tenant.Tags{Tenant: "jobs", Route: "enqueue"})
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-r.runCtx.Done():
				return
			case now := <-tick.C:
				want := int64(now.Sub(start).Seconds() * float64(r.o.rate))
				n := want - r.produced.Load()
				if n <= 0 {
					continue
				}
				if _, err := r.db.Exec(jobs, fmt.Sprintf("INSERT INTO %s (payload) SELECT 'job' FROM generate_series(1, $1::int)", r.table), n); err != nil {
					r.fail(err)
					continue
				}
				r.produced.Add(n)
			}
		}
	}()
}

// work runs the workers: claim the oldest job with SKIP LOCKED, delete
// it, commit.
func (r *modeRun) work() {
	claim := fmt.Sprintf("SELECT id FROM %s ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", r.table)
	finish := fmt.Sprintf("DELETE FROM %s WHERE id = $1 RETURNING extract(epoch FROM clock_timestamp() - created_at)", r.table)
	for range r.o.workers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			jobs := tenant.With(r.runCtx, tenant.Tags{Tenant: "jobs", Route: "work"})
			for r.runCtx.Err() == nil {
				ok, err := work(jobs, r.db, claim, finish, &r.st)
				if err != nil {
					r.fail(err)
				}
				if ok {
					r.done.Add(1)
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
}

// analytics runs three clients, staggered, each running its long
// statement again as soon as it ends; refused ones wait the retry-after
// (at least 100 ms) and try again.
func (r *modeRun) analytics() {
	an := tenant.With(r.runCtx, tenant.Tags{Tenant: "analytics", Route: "report"})
	aq := fmt.Sprintf("SELECT (SELECT count(*) FROM %s) AS n, pg_sleep($1::float8)", r.table)
	for i := range 3 {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			select {
			case <-r.runCtx.Done():
				return
			case <-time.After(time.Duration(i) * r.o.analytics / 3):
			}
			for r.runCtx.Err() == nil {
				r.running.Add(1)
				_, err := r.db.Exec(an, aq, r.o.analytics.Seconds())
				r.running.Add(-1)
				var be *sqlcomment.BudgetError
				switch {
				case errors.As(err, &be):
					r.refused.Add(1)
					select {
					case <-r.runCtx.Done():
					case <-time.After(max(be.RetryAfter, 100*time.Millisecond)):
					}
				case err != nil:
					r.fail(err)
				default:
					r.analyticsDone.Add(1)
				}
			}
		}()
	}
}

// vacuum vacuums the job table and reads its dead tuples every o.vacuum.
func (r *modeRun) vacuum() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(r.o.vacuum)
		defer tick.Stop()
		for {
			select {
			case <-r.runCtx.Done():
				return
			case <-tick.C:
			}
			c, err := r.pool.Acquire(r.runCtx)
			if err != nil {
				r.fail(err)
				continue
			}
			_, err = c.Exec(r.runCtx, "VACUUM "+r.table, pgx.QueryExecModeSimpleProtocol)
			var n int64
			if err == nil {
				err = c.QueryRow(r.runCtx, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::regclass", r.table).Scan(&n)
			}
			c.Release()
			if err != nil {
				r.fail(err)
				continue
			}
			r.dead.Store(n)
		}
	}()
}

// sample takes a sample a second until the run ends.
func (r *modeRun) sample() []sample {
	var out []sample
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.runCtx.Done():
		case <-tick.C:
		}
		if r.runCtx.Err() != nil {
			return out
		}
		lat, lock := r.st.cut()
		var warned uint64
		if bs, _ := r.budgets.Stats(); len(bs) > 0 {
			for _, w := range bs[0].Warned {
				warned += w
			}
		}
		out = append(out, sample{T: int(time.Since(start).Round(time.Second) / time.Second),
			Backlog: r.produced.Load() - r.done.Load(), Done: len(lat), P99Latency: p99(lat), P99Lock: p99(lock),
			Dead: r.dead.Load(), Analytics: r.running.Load(), Refused: r.refused.Load(), Warnings: warned})
	}
}

// work runs one job: claim, delete, commit. ok is false when the queue
// had nothing to claim.
func work(ctx context.Context, db *pgxcomment.DB, claim, finish string, st *stats) (ok bool, err error) {
	t0 := time.Now()
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.Background())
	q := db.With(tx)
	var id int64
	if err := q.QueryRow(ctx, claim).Scan(&id); errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	lock := time.Since(t0)
	var lat float64
	if err := q.QueryRow(ctx, finish, id).Scan(&lat); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, err
	}
	st.add(lat*1000, float64(lock)/float64(time.Millisecond))
	return true, nil
}
