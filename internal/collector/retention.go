package collector

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/store"
)

// StoreConfig configures what the collector keeps in the store. Its
// fields are promoted into Config.
type StoreConfig struct {
	// SpoolMaxBytes caps the store spool (0: the store's default).
	SpoolMaxBytes int64
	// Retention, when positive, is how long history is kept: rollups, hot
	// keys and statements older than it are removed in the background, at
	// start and then every RetainEvery (an hour), and a ClickHouse server
	// from 19.6 also gets it as the tables' TTL. 0 keeps everything; at
	// least store.MinRetention otherwise. The policy audit is kept.
	Retention time.Duration
}

// Validate checks the retention.
func (c StoreConfig) Validate() error {
	if c.Retention < 0 || c.Retention > 0 && c.Retention < store.MinRetention {
		return fmt.Errorf("%w: retention %v: want 0 (keep everything) or at least %v", ErrConfig, c.Retention, store.MinRetention)
	}
	if c.SpoolMaxBytes < 0 {
		return fmt.Errorf("%w: spool size cap %d is negative", ErrConfig, c.SpoolMaxBytes)
	}
	return nil
}

// RetainEvery is how often the retention runs after the one at start;
// RetainRetry how soon it tries again after a run that failed (the store
// was unreachable at start, say).
const (
	RetainEvery = time.Hour
	RetainRetry = 5 * time.Minute
)

// retention removes the store's history older than Config.Retention, on
// its own goroutine: it holds none of the server's locks, and the stores
// remove old rows beside writes (store.Retainer), so ingest goes on.
type retention struct {
	st   store.Retainer
	keep time.Duration
	now  func() time.Time
	log  *slog.Logger

	runs       *prometheus.CounterVec
	rows       prometheus.Counter
	partitions prometheus.Counter
	last       prometheus.Gauge
}

// newRetention returns the retention of cfg over st (the spool in front
// of the store, which passes it on), or nil when nothing is to be removed.
// next is the store behind the spool: it must be able to remove old rows.
func newRetention(cfg Config, st, next store.Store) (*retention, error) {
	if cfg.Retention <= 0 {
		return nil, nil
	}
	if st == nil {
		cfg.Logger.Warn("--retention has no effect without a store", "retention", cfg.Retention)
		return nil, nil
	}
	if _, ok := next.(store.Retainer); !ok {
		return nil, fmt.Errorf("%w: retention: the store (%T) cannot remove old rows", ErrConfig, next)
	}
	r := &retention{st: st.(store.Retainer), keep: cfg.Retention, now: cfg.Now, log: cfg.Logger}
	r.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qtop_collector_store_retention_runs_total",
		Help: "Runs of the store's retention (removing history older than --retention), by result (ok, error).",
	}, []string{"result"})
	r.rows = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_collector_store_retention_rows_removed_total",
		Help: "Rows the retention removed from the store (deleted, or held by the partitions dropped).",
	})
	r.partitions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_collector_store_retention_partitions_dropped_total",
		Help: "ClickHouse partitions (one table, one day, one node) the retention dropped.",
	})
	r.last = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qtop_collector_store_retention_last_success_timestamp_seconds",
		Help: "When the retention last ran without error, or, until it has, when the collector started (Unix time).",
	})
	// Until a run succeeds, the start stands for it: an alert on the
	// gauge's age then fires for a collector whose runs never succeed.
	r.last.Set(float64(cfg.Now().Unix()))
	r.runs.WithLabelValues("ok")
	r.runs.WithLabelValues("error")
	for _, c := range []prometheus.Collector{r.runs, r.rows, r.partitions, r.last} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	return r, nil
}

// start runs the retention now and then every RetainEvery (RetainRetry
// after a failure) until ctx ends.
func (r *retention) start(ctx context.Context, wg *sync.WaitGroup) {
	if r == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := r.once(ctx); err != nil {
				t.Reset(RetainRetry)
			} else {
				t.Reset(RetainEvery)
			}
		}
	}()
}

// once removes what is older than the retention at now, logs and counts
// it.
func (r *retention) once(ctx context.Context) (store.RetainResult, error) {
	now := r.now()
	before := now.Add(-r.keep)
	res, err := r.st.Retain(ctx, before)
	r.rows.Add(float64(res.Rows))
	r.partitions.Add(float64(res.Partitions))
	if err != nil {
		if ctx.Err() == nil {
			r.runs.WithLabelValues("error").Inc()
			r.log.Error("retention: old rows not removed; trying again", "in", RetainRetry, "before", before.UTC(), "err", err)
		}
		return res, err
	}
	r.runs.WithLabelValues("ok").Inc()
	r.last.Set(float64(now.Unix()))
	r.log.Info("retention: removed history older than the retention", "before", before.UTC(), "rows", res.Rows, "partitions", res.Partitions)
	return res, nil
}
