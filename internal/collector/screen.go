package collector

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// More rejection reasons (see metrics.go).
const (
	reasonRange       = "out_of_range" // a value above ingest's bounds (ingest.ErrRange)
	reasonContentType = "content_type" // not ingest.ContentType: 415
)

// guardMetrics count what the collector changed or refused in hostile
// input and what it set aside.
type guardMetrics struct {
	cleaned     *prometheus.CounterVec // strings replaced, by field
	saturated   prometheus.Counter
	deadLetters prometheus.GaugeFunc
	spoolStuck  prometheus.Gauge
	// sourcesEvicted counts probationary sources a newer one displaced.
	sourcesEvicted prometheus.Counter
	// refusalsHeld and refusalsUnheld count refusals held back
	// (Config.RefusalDelay) and those answered at once because
	// maxHeldRefusals were held.
	refusalsHeld, refusalsUnheld prometheus.Counter
}

func newGuardMetrics(reg prometheus.Registerer, s *Server) (*guardMetrics, error) {
	g := &guardMetrics{
		cleaned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_strings_cleaned_total",
			Help: "Strings of reports that were not printable UTF-8 within their length cap and were replaced by an escaped form, by field."},
			[]string{"field"}),
		saturated: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_sums_saturated_total",
			Help: "Merged sums that reached their maximum and stopped growing instead of wrapping."}),
		deadLetters: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "qtop_collector_dead_letter_batches",
			Help: "Batches the store refused that were set aside in dead-letter files of the spool since start."},
			func() float64 {
				if s.em.spool == nil {
					return 0
				}
				return float64(s.em.spool.Stats().DeadLetters)
			}),
		sourcesEvicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_sources_evicted_total",
			Help: "Sources on probation (new, not yet established) displaced by newer ones while the probation places were full; established sources are never evicted."}),
		refusalsHeld: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_refusals_held_total",
			Help: "Reports refused for their content or credentials whose answer was held back (--refusal-delay), so a client sending junk in a loop is slowed down."}),
		refusalsUnheld: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_refusals_unheld_total",
			Help: "Refusals answered at once, their connection closed, because the most refusals that are held back at once already were."}),
		spoolStuck: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_spool_oldest_seconds",
			Help: "Age of the oldest batch waiting in the spool (0 when empty); growing means the spool is not draining."}),
	}
	for _, c := range []prometheus.Collector{g.cleaned, g.saturated, g.deadLetters, g.spoolStuck, g.sourcesEvicted,
		g.refusalsHeld, g.refusalsUnheld} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{"service", "instance", "host", "key", "key_tenant"} {
		g.cleaned.WithLabelValues(f)
	}
	return g, nil
}

// screen makes every string of a decoded report one a store and a
// terminal take, with tenant's own check (tenant.Clean): the source's
// names and the key → tenant map. Row tenants and routes are checked by
// tenant's tag checks: an invalid tenant counts under its stand-in
// (tenant.Substitute), an invalid route under its own
// (tenant.SubstituteRoute), so a bad row is stood in alone, the rest of
// the report merged as sent, and nothing joins another tenant's or route's
// row, the overflow route included; each such row is counted once. Hot
// keys are checked where they leave the sketch (cleanKey). Values were
// bounded by the decoder. It runs before the merge lock is taken.
func (in *intake) screen(rep *report.Report) {
	clean := func(v *string, field string, max int) {
		if c, changed := tenant.Clean(*v, max); changed {
			*v = c
			in.guard.cleaned.WithLabelValues(field).Inc()
		}
	}
	clean(&rep.Source.Service, "service", tenant.MaxRouteLen)
	clean(&rep.Source.Instance, "instance", tenant.MaxRouteLen)
	clean(&rep.Source.Host, "host", tenant.MaxRouteLen)
	var fixed map[string]string
	for k, t := range rep.KeyTenants {
		ck, kc := tenant.Clean(k, tenant.MaxKeyLen)
		if tenant.ValidateTenant(t) != nil {
			t = standIn(t)
			kc = true
			in.guard.cleaned.WithLabelValues("key_tenant").Inc()
		}
		if kc {
			if fixed == nil {
				fixed = make(map[string]string)
			}
			delete(rep.KeyTenants, k)
			fixed[ck] = t
			if ck != k {
				in.guard.cleaned.WithLabelValues("key").Inc()
			}
		}
	}
	for k, t := range fixed {
		rep.KeyTenants[k] = t
	}
	for i := range rep.Rows {
		row := &rep.Rows[i]
		bad := false
		if tenant.ValidateTenant(row.Tenant) != nil && row.Tenant != report.UnknownTenant {
			row.Tenant, bad = standIn(row.Tenant), true
		}
		// Only a bad route is replaced: a valid "other" is the reporter's
		// overflow route (its recorder escaped a route really named so).
		if row.Route != "" && tenant.ValidateRoute(row.Route) != nil {
			row.Route, _ = tenant.SubstituteRoute(row.Route)
			bad = true
		}
		if bad {
			in.invalidTags.Inc()
		}
	}
}

// cleanKey is a hot key as the store and the live view get it.
func (g *guardMetrics) cleanKey(k string) string {
	c, changed := tenant.Clean(k, tenant.MaxKeyLen)
	if changed {
		g.cleaned.WithLabelValues("key").Inc()
	}
	return c
}

// addSat adds b to *a, stopping at the largest uint64 instead of wrapping;
// it reports whether it saturated.
func addSat(a *uint64, b uint64) bool {
	sum, carry := bits.Add64(*a, b, 0)
	if carry != 0 {
		*a = math.MaxUint64
		return true
	}
	*a = sum
	return false
}

// Bounds of the decode path.
const (
	// decodeSlots bounds the reports decoded and merged at once.
	decodeSlots = 64
	// pooledReports and pooledRows bound the decoded reports kept for
	// reuse: one per decode slot, so that under load no report's rows and
	// latencies are made anew (with 16 kept, the rest were, and that was a
	// tenth of what the collector allocated); a report whose rows outgrew
	// pooledRows is left to the GC, so one large (or forged) report does
	// not stay resident. At most pooledReports × pooledRows rows are kept.
	pooledReports = decodeSlots
	pooledRows    = 512
	// decodeMemory bounds the memory (ingest.DecodeBudget of each body)
	// that reports being decoded may take at once; a report that does
	// not fit gets 503 and Retry-After.
	decodeMemory = 192 << 20
)

// contentTypeIs reports whether the media type of header ct is want
// (parameters and case aside).
func contentTypeIs(ct, want string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), want)
}

// bearer returns the token of an "Authorization: Bearer …" header; the
// scheme is case-insensitive (RFC 7235).
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	return strings.TrimLeft(h[7:], " "), true
}

// spoolStuckAfter is how long the oldest spooled batch may wait before
// the store counts as unhealthy even though it answers its ping.
const spoolStuckAfter = 2 * time.Minute

// spoolStuck judges spool stats at now (the spool stamps batches with the
// wall clock).
func spoolStuck(st store.SpoolStats, now time.Time) (time.Duration, error) {
	if st.Oldest.IsZero() {
		return 0, nil
	}
	age := now.Sub(st.Oldest)
	if st.Failing {
		// A ping may answer (a shard's other node, say) while writes fail.
		return age, fmt.Errorf("the store failed a write: %d rows wait in the spool, the oldest for %v", st.PendingRows, age.Truncate(time.Second))
	}
	if age > spoolStuckAfter {
		return age, fmt.Errorf("spool not draining: %d rows waiting, the oldest for %v (%d batches set aside in dead-letter files)",
			st.PendingRows, age.Truncate(time.Second), st.DeadLetters)
	}
	return age, nil
}

// decodeStatus is the HTTP status and rejection reason of a decode error.
func decodeStatus(err error) (int, string) {
	switch {
	case errors.Is(err, report.ErrVersion):
		return http.StatusBadRequest, reasonVersion
	case errors.Is(err, report.ErrRange):
		return http.StatusBadRequest, reasonRange
	case errors.Is(err, report.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, reasonTooLarge
	}
	return http.StatusBadRequest, reasonMalformed
}

// standIn is the tenant a row or hot key of an invalid tenant name counts
// under: the name's stand-in (tenant.Substitute), as the OTLP door and
// the sampler name it, so its load stays apart from every other tenant's
// and from the untagged load; no name is the untagged load.
func standIn(name string) string {
	if name == "" {
		return report.UnknownTenant
	}
	s, _ := tenant.Substitute(name)
	return s
}
