package ingest

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
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
}

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
			"Records with a tenant, route or key above its length limit, or an unknown kind (counted under unknown/other).", nil, nil),
		windows: prometheus.NewDesc("qtop_ingest_windows_total",
			"Windows cut by the recorder.", nil, nil),
		rows: prometheus.NewDesc("qtop_ingest_window_rows",
			"Tenant × route × kind rows in the last window cut.", nil, nil),
	}
}

func (m *recorderMetrics) cut(rows int) {
	m.mu.Lock()
	m.nwindows++
	m.lastRows = rows
	m.mu.Unlock()
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
		ch <- prometheus.MustNewConstMetric(m.records, prometheus.CounterValue, float64(n), Kind(k).String())
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
