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

	table := randomName()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (
		id bigserial PRIMARY KEY,
		created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
		payload text NOT NULL
	) WITH (autovacuum_enabled = false)`, table)); err != nil {
		return res, err
	}
	defer pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)

	budgets := sqlcomment.NewBudgets(sqlcomment.WithBudgetLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if mode != "none" {
		m := policy.Enforce
		if mode == "warn" {
			m = policy.Warn
		}
		if err := budgets.Set([]policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
			Concurrency: 1, Mode: m, Reason: "analytics statements hold back vacuum of the job queue"}}, nil); err != nil {
			return res, err
		}
	}
	db := pgxcomment.Wrap(pool, sqlcomment.WithApplication("budgetqueue"), sqlcomment.WithBudgets(budgets))

	runCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	var produced, done atomic.Int64
	var running atomic.Int64
	var refused atomic.Uint64
	var st stats
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	fail := func(err error) {
		if err != nil && runCtx.Err() == nil {
			select {
			case errc <- err:
			default:
			}
		}
	}

	// Producer: o.rate jobs a second, in 100 batches.
	wg.Add(1)
	go func() {
		defer wg.Done()
		jobs := tenant.With(runCtx, tenant.Tags{Tenant: "jobs", Route: "enqueue"})
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-runCtx.Done():
				return
			case now := <-tick.C:
				want := int64(now.Sub(start).Seconds() * float64(o.rate))
				n := want - produced.Load()
				if n <= 0 {
					continue
				}
				if _, err := db.Exec(jobs, fmt.Sprintf("INSERT INTO %s (payload) SELECT 'job' FROM generate_series(1, $1::int)", table), n); err != nil {
					fail(err)
					continue
				}
				produced.Add(n)
			}
		}
	}()

	// Workers: claim the oldest job with SKIP LOCKED, delete it, commit.
	claim := fmt.Sprintf("SELECT id FROM %s ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", table)
	finish := fmt.Sprintf("DELETE FROM %s WHERE id = $1 RETURNING extract(epoch FROM clock_timestamp() - created_at)", table)
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs := tenant.With(runCtx, tenant.Tags{Tenant: "jobs", Route: "work"})
			for runCtx.Err() == nil {
				ok, err := work(jobs, db, claim, finish, &st)
				if err != nil {
					fail(err)
				}
				if ok {
					done.Add(1)
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}

	// Analytics: three clients, staggered, each running its long
	// statement again as soon as it ends; refused ones wait the
	// retry-after (at least 100 ms) and try again.
	an := tenant.With(runCtx, tenant.Tags{Tenant: "analytics", Route: "report"})
	aq := fmt.Sprintf("SELECT (SELECT count(*) FROM %s) AS n, pg_sleep($1::float8)", table)
	var analyticsDone atomic.Int64
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-runCtx.Done():
				return
			case <-time.After(time.Duration(i) * o.analytics / 3):
			}
			for runCtx.Err() == nil {
				running.Add(1)
				_, err := db.Exec(an, aq, o.analytics.Seconds())
				running.Add(-1)
				var be *sqlcomment.BudgetError
				switch {
				case errors.As(err, &be):
					refused.Add(1)
					wait := max(be.RetryAfter, 100*time.Millisecond)
					select {
					case <-runCtx.Done():
					case <-time.After(wait):
					}
				case err != nil:
					fail(err)
				default:
					analyticsDone.Add(1)
				}
			}
		}()
	}

	// Vacuum and sampling, once a second.
	var dead atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(o.vacuum)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			c, err := pool.Acquire(runCtx)
			if err != nil {
				fail(err)
				continue
			}
			_, err = c.Exec(runCtx, "VACUUM "+table, pgx.QueryExecModeSimpleProtocol)
			var n int64
			if err == nil {
				err = c.QueryRow(runCtx, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::regclass", table).Scan(&n)
			}
			c.Release()
			if err != nil {
				fail(err)
				continue
			}
			dead.Store(n)
		}
	}()

	start := time.Now()
	tick := time.NewTicker(time.Second)
	for t := 1; ; t++ {
		select {
		case <-runCtx.Done():
		case <-tick.C:
		}
		if runCtx.Err() != nil {
			break
		}
		lat, lock := st.cut()
		var warned uint64
		if bs, _ := budgets.Stats(); len(bs) > 0 {
			for _, w := range bs[0].Warned {
				warned += w
			}
		}
		res.samples = append(res.samples, sample{T: int(time.Since(start).Round(time.Second) / time.Second),
			Backlog: produced.Load() - done.Load(), Done: len(lat), P99Latency: p99(lat), P99Lock: p99(lock),
			Dead: dead.Load(), Analytics: running.Load(), Refused: refused.Load(), Warnings: warned})
	}
	tick.Stop()
	wg.Wait()
	select {
	case err := <-errc:
		return res, err
	default:
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	st.cut()
	res.p99Latency, res.p99Lock = p99(st.all), p99(st.allL)
	for _, v := range st.allL {
		res.maxLock = max(res.maxLock, v)
	}
	res.analyticsDone = analyticsDone.Load()
	return res, nil
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
