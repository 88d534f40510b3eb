package collector

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/topn"
)

// Per-tenant Prometheus series (qtop_collector_tenant_*_total).
//
// A tenant gets series of its own once it is among the top metricsTopN
// by RU (the ranking's members). From then on its counters count all of
// its work, whether it stays in the top or not, and never go back: they
// are monotonic for as long as the series exist, so rate() and increase()
// are right. The series are dropped only once the tenant has been out of
// the top for seriesHold; it may come back later as new series (from 0,
// which Prometheus reads as a new series after staleness, not as a reset
// within one). Work of tenants without series of their own counts in the
// "other" series, which is monotonic too.
//
// Bounds: at most seriesCap tenants have series at once, and at most
// seriesAdmitPerHour tenants are given series in any hour, so the
// distinct tenant label values over any hour are at most
// seriesCap + seriesAdmitPerHour (80), plus "other".
const (
	seriesCap          = 2 * metricsTopN
	seriesAdmitPerHour = 2 * metricsTopN
	seriesHold         = time.Hour
)

type tenantSeries struct {
	mu       sync.Mutex
	ms       []topn.Metric
	descs    []*prometheus.Desc
	rows     map[string]*seriesRow
	other    topn.Values
	admitted []time.Time // admissions in the last hour, oldest first
}

type seriesRow struct {
	v       topn.Values
	lastTop time.Time // the last time the tenant was in the top
}

var _ prometheus.Collector = (*tenantSeries)(nil)

func newTenantSeries(reg prometheus.Registerer, ms ...topn.Metric) (*tenantSeries, error) {
	t := &tenantSeries{ms: ms, rows: map[string]*seriesRow{}}
	for _, m := range ms {
		help := fmt.Sprintf("%s by tenant: tenants that reached the top %d by RU in the last hour (at most %d at once, %d distinct an hour), the rest in \"other\"; monotonic while a series exists.",
			m.Measure, metricsTopN, seriesCap, seriesCap+seriesAdmitPerHour)
		if m.Help != "" {
			help = m.Help + " " + help
		}
		t.descs = append(t.descs, prometheus.NewDesc(m.Name, help, []string{"tenant"}, nil))
	}
	if err := reg.Register(t); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	return t, nil
}

// add counts v for tenant tn: in its own series when it has them, else in
// "other". While fewer than metricsTopN tenants have series, a new one
// gets series at once (as the ranking takes members while it has room).
func (t *tenantSeries) add(tn string, v topn.Values, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rows[tn]
	if r == nil && tn != topn.Other && len(t.rows) < metricsTopN && len(t.admitted) < seriesAdmitPerHour {
		r = &seriesRow{lastTop: now}
		t.rows[tn] = r
		t.admitted = append(t.admitted, now)
	}
	if r != nil {
		r.v.Add(v)
		return
	}
	t.other.Add(v)
}

// BoundedCardinality is the most distinct tenant label values the series
// have over any hour, "other" included (for the dashboards' catalog).
func (t *tenantSeries) BoundedCardinality() int { return seriesCap + seriesAdmitPerHour + 1 }

// refresh gives series to the members of the top that have none (within
// the caps), marks the members as in the top at now, and drops the series
// of tenants out of the top for longer than seriesHold. Call it after each
// Rerank.
func (t *tenantSeries) refresh(members []string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, r := range t.rows {
		if now.Sub(r.lastTop) > seriesHold {
			delete(t.rows, name)
		}
	}
	i := 0
	for i < len(t.admitted) && now.Sub(t.admitted[i]) >= time.Hour {
		i++
	}
	t.admitted = t.admitted[i:]
	for _, name := range members {
		if name == topn.Other {
			continue
		}
		if r := t.rows[name]; r != nil {
			r.lastTop = now
			continue
		}
		if len(t.admitted) >= seriesAdmitPerHour {
			continue // stays in "other" until the hour's budget frees
		}
		if len(t.rows) >= seriesCap && !t.evictLocked(now) {
			continue
		}
		t.rows[name] = &seriesRow{lastTop: now}
		t.admitted = append(t.admitted, now)
	}
}

// evictLocked drops the series of the tenant longest out of the top, if
// one is out of it at all.
func (t *tenantSeries) evictLocked(now time.Time) bool {
	var (
		oldest string
		at     time.Time
	)
	for name, r := range t.rows {
		if r.lastTop.Before(now) && (oldest == "" || r.lastTop.Before(at)) {
			oldest, at = name, r.lastTop
		}
	}
	if oldest == "" {
		return false
	}
	delete(t.rows, oldest)
	return true
}

// Describe implements prometheus.Collector.
func (t *tenantSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range t.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (t *tenantSeries) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	names := make([]string, 0, len(t.rows))
	vals := make([]topn.Values, 0, len(t.rows)+1)
	for name := range t.rows {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, n := range names {
		vals = append(vals, t.rows[n].v)
	}
	names, vals = append(names, topn.Other), append(vals, t.other)
	t.mu.Unlock()
	for i, m := range t.ms {
		for j, n := range names {
			ch <- prometheus.MustNewConstMetric(t.descs[i], prometheus.CounterValue, vals[j][m.Measure], n)
		}
	}
}
