package meter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/topn"
)

// recorderMetrics exposes the recorder's counters, which live in its
// shards (so that Record touches no shared cache line), summed at scrape.
type recorderMetrics struct {
	r *Recorder

	records, errors, folded, evicted, invalid *prometheus.Desc
	windows, rows                             *prometheus.Desc

	mu       sync.Mutex
	nwindows uint64
	lastRows int

	// tenants names the top tenants by DB time, the rest as "other".
	tenants *topn.Ranking
}

// Per-tenant metrics, top-N tenants plus "other" (package topn).
var tenantMetrics = []topn.Metric{
	{Measure: topn.DBTime, Name: "qtop_ingest_tenant_db_seconds_total", Help: "Database time recorded, by tenant (top N and \"other\")."},
	{Measure: topn.Requests, Name: "qtop_ingest_tenant_requests_total", Help: "Requests and jobs recorded, by tenant (top N and \"other\")."},
	{Measure: topn.Errors, Name: "qtop_ingest_tenant_errors_total", Help: "Failed requests and jobs recorded, by tenant (top N and \"other\")."},
	{Measure: topn.RU, Name: "qtop_ingest_tenant_ru_total", Help: "Request units recorded, by tenant (top N and \"other\")."},
	{Measure: topn.Bytes, Name: "qtop_ingest_tenant_bytes_total", Help: "Bytes recorded, by tenant (top N and \"other\")."},
}

// register registers the recorder's metrics, and the per-tenant ones
// through a topn ranking of n tenants.
func (m *recorderMetrics) register(reg prometheus.Registerer, n int) error {
	if err := reg.Register(m); err != nil {
		return fmt.Errorf("%w: registering metrics: %v", ErrInvalid, err)
	}
	rank, err := topn.New(n)
	if err != nil {
		return fmt.Errorf("%w: top tenants: %v", ErrInvalid, err)
	}
	if _, err := topn.NewCollector(reg, rank, "tenant", tenantMetrics...); err != nil {
		return fmt.Errorf("%w: registering metrics: %v", ErrInvalid, err)
	}
	m.tenants = rank
	return nil
}

// window feeds a cut window's rows to the per-tenant ranking, heaviest
// first (so that the first members are the heaviest tenants of the first
// window, whatever the order of the rows).
func (m *recorderMetrics) window(rep *report.Report) {
	order := make([]int, len(rep.Rows))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := &rep.Rows[a], &rep.Rows[b]
		if c := cmp.Compare(rb.Duration, ra.Duration); c != 0 {
			return c
		}
		return strings.Compare(ra.Tenant, rb.Tenant)
	})
	for _, i := range order {
		row := &rep.Rows[i]
		var v topn.Values
		if row.Kind == report.KindDB {
			v[topn.DBTime] = row.Duration.Seconds()
		} else {
			v[topn.Requests] = float64(row.Count)
			v[topn.Errors] = float64(row.Errors)
		}
		v[topn.RU] = row.RU
		v[topn.Bytes] = float64(row.Bytes)
		_ = m.tenants.Add(row.Tenant, v) // values are finite and ≥ 0 by construction
	}
	m.tenants.Rerank()
}

var _ prometheus.Collector = (*recorderMetrics)(nil)

func newRecorderMetrics(r *Recorder) *recorderMetrics {
	return &recorderMetrics{
		r: r,
		records: prometheus.NewDesc("qtop_ingest_records_total",
			"Records added to the recorder, by kind.", []string{"kind"}, nil),
		errors: prometheus.NewDesc("qtop_ingest_record_errors_total",
			"Records that reported a failed unit of work.", nil, nil),
		folded: prometheus.NewDesc("qtop_ingest_records_folded_total",
			"Records counted under the tenant \"other\" because the tenant sketch was full.", nil, nil),
		evicted: prometheus.NewDesc("qtop_ingest_tenants_evicted_total",
			"Tenants whose rows were folded into \"other\" to make room for a heavier one.", nil, nil),
		invalid: prometheus.NewDesc("qtop_ingest_records_invalid_total",
			"Records with a tenant, route or key above its length limit, or an unknown kind (the tenant counted under its stand-in, tenant.Substitute; the route under its own, tenant.SubstituteRoute; the key dropped).", nil, nil),
		windows: prometheus.NewDesc("qtop_ingest_windows_total",
			"Windows cut by the recorder.", nil, nil),
		rows: prometheus.NewDesc("qtop_ingest_window_rows",
			"Tenant × route × kind rows in the last window cut.", nil, nil),
	}
}

func (m *recorderMetrics) cut(rep *report.Report) {
	m.mu.Lock()
	m.nwindows++
	m.lastRows = len(rep.Rows)
	m.mu.Unlock()
	m.window(rep)
}

// Describe implements prometheus.Collector.
func (m *recorderMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.records, m.errors, m.folded, m.evicted, m.invalid, m.windows, m.rows} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *recorderMetrics) Collect(ch chan<- prometheus.Metric) {
	var sum shardStats
	for i := range m.r.shards {
		s := &m.r.shards[i]
		s.mu.Lock()
		st := s.stats
		s.mu.Unlock()
		for k := range st.records {
			sum.records[k] += st.records[k]
		}
		sum.errors += st.errors
		sum.folded += st.folded
		sum.evicted += st.evicted
		sum.invalid += st.invalid
	}
	for k, n := range sum.records {
		ch <- prometheus.MustNewConstMetric(m.records, prometheus.CounterValue, float64(n), report.Kind(k).String())
	}
	ch <- prometheus.MustNewConstMetric(m.errors, prometheus.CounterValue, float64(sum.errors))
	ch <- prometheus.MustNewConstMetric(m.folded, prometheus.CounterValue, float64(sum.folded))
	ch <- prometheus.MustNewConstMetric(m.evicted, prometheus.CounterValue, float64(sum.evicted))
	ch <- prometheus.MustNewConstMetric(m.invalid, prometheus.CounterValue, float64(sum.invalid))
	m.mu.Lock()
	nw, lr := m.nwindows, m.lastRows
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(m.windows, prometheus.CounterValue, float64(nw))
	ch <- prometheus.MustNewConstMetric(m.rows, prometheus.GaugeValue, float64(lr))
}

// reporterMetrics are the Reporter's metrics.
type reporterMetrics struct {
	sent, bytes, replyErrors, policies prometheus.Counter
	failed, dropped                    *prometheus.CounterVec
	queue                              prometheus.Gauge
	failovers, sectionsDropped         prometheus.Counter
}

func newReporterMetrics(*Reporter) *reporterMetrics {
	m := &reporterMetrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_ingest_reports_sent_total",
			Help: "Reports the collector accepted."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_ingest_report_sent_bytes_total",
			Help: "Encoded bytes of the reports the collector accepted."}),
		replyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_ingest_reply_errors_total",
			Help: "Replies of the collector that could not be decoded (the report itself was accepted)."}),
		policies: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_ingest_policy_updates_total",
			Help: "New policies handed to the policy handler."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_ingest_report_attempts_failed_total",
			Help: "Failed attempts to send a report, by reason: network, timeout, throttled (408/425/429), server (5xx), unauthorized (401/403: the token; the report is kept), rejected (other 4xx)."},
			[]string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_ingest_reports_dropped_total",
			Help: "Reports given up, by reason: queue_full, rejected, shutdown, encode."},
			[]string{"reason"}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_ingest_queue_reports",
			Help: "Reports waiting to be sent."}),
		failovers: newFailoverCounter(),
		sectionsDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_ingest_sections_dropped_total",
			Help: "Sections of a process's own (tenant names, budgets, freshness) that could not be encoded and were left out of their report, which was sent without them."}),
	}
	for _, r := range []string{"network", "timeout", "throttled", "server", "unauthorized", "rejected"} {
		m.failed.WithLabelValues(r)
	}
	for _, r := range []string{"queue_full", "rejected", "shutdown", "encode"} {
		m.dropped.WithLabelValues(r)
	}
	return m
}

func (m *reporterMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.sent, m.bytes, m.replyErrors, m.policies, m.failed, m.dropped, m.queue, m.failovers, m.sectionsDropped} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("%w: registering metrics: %v", ErrInvalid, err)
		}
	}
	return nil
}
