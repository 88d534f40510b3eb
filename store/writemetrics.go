package store

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WriteMetrics are a store's write metrics, the same for every store so
// that the collector's dashboard reads them whichever store it runs on:
// qtop_collector_store_rows_written_total{table},
// qtop_collector_store_write_errors_total{table} and
// qtop_collector_store_write_seconds. A nil *WriteMetrics records nothing.
type WriteMetrics struct {
	rows, errs *prometheus.CounterVec
	seconds    prometheus.Histogram
	reg        prometheus.Registerer // where they are registered (nil: nowhere)
}

// NewWriteMetrics makes the metrics and registers them on reg (nil: not
// registered). The tables' series start at 0, so a rate reads 0, not
// nothing, before the first write or error.
func NewWriteMetrics(reg prometheus.Registerer, tables ...string) (*WriteMetrics, error) {
	m := &WriteMetrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qtop_collector_store_rows_written_total",
			Help: "Rows written to the store, by table.",
		}, []string{"table"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qtop_collector_store_write_errors_total",
			Help: "Batches the store failed to write, by table.",
		}, []string{"table"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "qtop_collector_store_write_seconds",
			Help:    "Time to write one batch to the store.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}),
	}
	for _, t := range tables {
		m.rows.WithLabelValues(t)
		m.errs.WithLabelValues(t)
	}
	if reg == nil {
		return m, nil
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{m.rows, m.errs, m.seconds} {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, err
		}
		done = append(done, c)
	}
	m.reg = reg
	return m, nil
}

// Unregister takes the metrics back from the registry they were
// registered on, so that a store opened again on it (after a failed open,
// or a reopen) can register its own.
func (m *WriteMetrics) Unregister() {
	if m == nil || m.reg == nil {
		return
	}
	for _, c := range []prometheus.Collector{m.rows, m.errs, m.seconds} {
		m.reg.Unregister(c)
	}
}

// Written records one batch of table written since start: its time, its
// rows if err is nil, an error otherwise. A canceled write (the collector
// stopping) is not counted as an error.
func (m *WriteMetrics) Written(table string, rows int, start time.Time, err error) {
	if m == nil {
		return
	}
	m.seconds.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		m.rows.WithLabelValues(table).Add(float64(rows))
	case !errors.Is(err, context.Canceled):
		m.errs.WithLabelValues(table).Inc()
	}
}
