package collector

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/topn"
)

// Rejection reasons, the values of the reason label of
// qtop_collector_reports_rejected_total.
const (
	reasonVersion      = "version"
	reasonMalformed    = "malformed"
	reasonTooLarge     = "too_large"
	reasonUnauthorized = "unauthorized"
	reasonAdmission    = "admission"
	reasonBusy         = "busy"
	reasonStale        = "stale"
	reasonWAL          = "wal"
	reasonDisk         = "disk"
	reasonMethod       = "method"
)

// metricsTopN is how many tenants get their own Prometheus series.
const metricsTopN = 20

type metrics struct {
	accepted, duplicates    prometheus.Counter
	rejected                *prometheus.CounterVec
	rows                    prometheus.Counter
	retimed                 prometheus.Counter
	late                    prometheus.Counter
	invalidTags, foldedRows prometheus.Counter
	tenantOverflow          prometheus.Counter
	tenantPromoted          prometheus.Counter
	mergeSeconds            prometheus.Histogram
	rollupsWritten          *prometheus.CounterVec
	storeErrors             prometheus.Counter
	storeHealthy            prometheus.Gauge
	walBytes                prometheus.Gauge
	openMinutes             prometheus.Gauge
	sources                 prometheus.Gauge
	tenantsTracked          prometheus.Gauge
	samplerErrors           prometheus.Counter
	samples                 prometheus.Counter
	pgActive                *prometheus.CounterVec // by tagged: true, false
	policyChanges           prometheus.Counter
	ranking                 *topn.Ranking
	enforcement             *enforcementMetrics // enforcemetrics.go
	tenants                 *tenantSeries       // the per-tenant series, fed beside ranking
}

// fresh says whether a report that waited age at its reporter counts in
// the live view as well as in its minute: not from lateAfter (counted as
// late).
func (m *metrics) fresh(age time.Duration) bool {
	if age < lateAfter {
		return true
	}
	m.late.Inc()
	return false
}

// merged counts a report merged, whose handling began at t0.
func (m *metrics) merged(t0 time.Time) {
	m.accepted.Inc()
	m.mergeSeconds.Observe(time.Since(t0).Seconds())
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_reports_total",
			Help: "Reports merged."}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_reports_duplicate_total",
			Help: "Reports recognised as already merged (same source and sequence number) and acknowledged without counting them again."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_reports_rejected_total",
			Help: "Reports refused, by reason."}, []string{"reason"}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_report_rows_total",
			Help: "Tenant×route×kind rows merged."}),
		retimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_reports_retimed_total",
			Help: "Reports whose window was too far in the past or future (a clock that jumped) and were counted in the minute they arrived."}),
		late: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_reports_late_total",
			Help: "Reports that waited 3 s or more at their reporter (a backlog sent after an outage or a restart): counted in their minute (history, cost reports), not in the live view nor in the series counted with it (per-tenant, rows, enforcement)."}),
		invalidTags: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_invalid_tags_total",
			Help: "Rows whose tenant or route was not a valid tag value, each counted once: the tenant counted under its stand-in (tenant.Substitute), the route under its own (tenant.SubstituteRoute)."}),
		foldedRows: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_rows_folded_total",
			Help: "Rows folded into tenant other because the open minute held its maximum of rows."}),
		tenantOverflow: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_live_tenant_overflow_total",
			Help: "Rows counted under other in the live view because it tracked its maximum of tenants."}),
		tenantPromoted: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_live_tenant_promoted_total",
			Help: "Tenants beyond the live view's maximum moved into it in place of a live tenant with at most half their RU over the same seconds (so that a tenant turning noisy late is shown by name, not under other)."}),
		mergeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "qtop_collector_merge_seconds",
			Help: "Time to decode, log and merge one report.", Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10)}),
		rollupsWritten: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_rows_emitted_total",
			Help: "Rows handed to the store (written or spooled), by table."}, []string{"table"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_emit_errors_total",
			Help: "Writes that neither the store nor the spool took; the minute is written again at the next tick."}),
		storeHealthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_store_healthy",
			Help: "1 when the store answers its ping, else 0."}),
		walBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_wal_bytes",
			Help: "Bytes in the write-ahead log of open minutes."}),
		openMinutes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_open_windows",
			Help: "Minutes held in memory (open, in grace, or accepting late reports)."}),
		sources: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_sources",
			Help: "Reporting processes seen recently."}),
		tenantsTracked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_live_tenants",
			Help: "Tenants tracked by the live view."}),
		samplerErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_pg_sample_errors_total",
			Help: "pg_stat_activity samples that failed."}),
		samples: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_pg_samples_total",
			Help: "pg_stat_activity samples taken."}),
		pgActive: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_pg_active_session_seconds_total",
			Help: "Seconds of active PostgreSQL sessions seen by the pg_stat_activity sampler (DB load), with a tenant tag or without (tagged=false: a job or service that does not say whose work it is; the per-tenant series count only tagged load)."}, []string{"tagged"}),
		policyChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_policy_changes_total",
			Help: "Policy changes accepted."}),
	}
	for _, c := range []prometheus.Collector{m.accepted, m.duplicates, m.rejected, m.rows, m.retimed, m.late, m.invalidTags,
		m.foldedRows, m.tenantOverflow, m.tenantPromoted, m.mergeSeconds, m.rollupsWritten, m.storeErrors, m.storeHealthy,
		m.walBytes, m.openMinutes, m.sources, m.tenantsTracked, m.samplerErrors, m.samples, m.pgActive, m.policyChanges} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	m.pgActive.WithLabelValues("true")
	m.pgActive.WithLabelValues("false")
	for _, r := range []string{reasonVersion, reasonMalformed, reasonTooLarge, reasonUnauthorized, reasonAdmission, reasonBusy, reasonStale, reasonWAL, reasonDisk} {
		m.rejected.WithLabelValues(r)
	}
	var err error
	if m.enforcement, err = newEnforcementMetrics(reg); err != nil {
		return nil, err
	}
	m.ranking, err = topn.New(metricsTopN, topn.WithRankBy(topn.RU))
	if err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	if m.tenants, err = newTenantSeries(reg,
		topn.Metric{Measure: topn.RU, Name: "qtop_collector_tenant_ru_total"},
		topn.Metric{Measure: topn.DBTime, Name: "qtop_collector_tenant_db_seconds_total",
			Help: "The time of the statements the tenant's processes reported (agents, gates, OTLP spans), as they measured it. The live view, history and cost reports give a tenant the larger of that and the sessions the --postgres sampler saw, scaled to pg_stat_statements: with --postgres they can be higher."},
		topn.Metric{Measure: topn.Requests, Name: "qtop_collector_tenant_requests_total"},
		topn.Metric{Measure: topn.Errors, Name: "qtop_collector_tenant_errors_total"},
		topn.Metric{Measure: topn.Bytes, Name: "qtop_collector_tenant_bytes_total"},
	); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	return m, nil
}

// certExpiry is qtop_collector_tls_cert_expiry_timestamp_seconds: when
// the certificate the listeners serve expires (the one reloaded last,
// read at each scrape), for an alert before clients refuse it
// (QtopCollectorCertExpiring).
func certExpiry(c *tls.Config) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "qtop_collector_tls_cert_expiry_timestamp_seconds",
		Help: "When the TLS certificate the collector serves expires (Unix time)."}, func() float64 {
		cert, err := c.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil || cert == nil {
			return 0
		}
		leaf := cert.Leaf
		if leaf == nil && len(cert.Certificate) > 0 {
			leaf, _ = x509.ParseCertificate(cert.Certificate[0])
		}
		if leaf == nil {
			return 0
		}
		return float64(leaf.NotAfter.Unix())
	})
}
