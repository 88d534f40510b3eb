package pgactivity

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts the statements whose tags a Sampler could not read, and
// those whose tenant is not a valid name, so that a tenant is never lost
// or renamed in silence. Make it once per process
// (NewMetrics) and hand it to every Sampler with WithMetrics; a sampler
// made again after a reconnect keeps counting into it.
//
// Each statement (pid, query_start) counts once, in the first sample that
// sees it, however long it runs.
type Metrics struct {
	malformed, truncated, invalid prometheus.Counter
	nMalformed, nCut, nInvalid    atomic.Uint64

	mu   sync.Mutex
	seen map[int32]time.Time // statements counted in the last sample
	next map[int32]time.Time
}

// NewMetrics registers the counters on reg:
//
//	qtop_pgactivity_malformed_comments_total   statements whose comment could not be read whole
//	qtop_pgactivity_truncated_statements_total statements cut at track_activity_query_size with their tags lost
//	qtop_pgactivity_invalid_tenants_total      statements whose tenant is not a valid name, counted under its stand-in
//
// reg nil registers nothing (the counts are still read with Counts).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		malformed: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_pgactivity_malformed_comments_total",
			Help: "Sampled statements whose sqlcommenter comment could not be read whole (some or all of their tags lost), each counted once."}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_pgactivity_truncated_statements_total",
			Help: "Sampled statements cut at track_activity_query_size before their comment, so their tags are lost; raise track_activity_query_size."}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_pgactivity_invalid_tenants_total",
			Help: "Sampled statements whose tenant is not a valid name (too long, unprintable, in parentheses), each counted once; their load counts under the name's stand-in (tenant.Substitute), apart from every other tenant."}),
		seen: map[int32]time.Time{}, next: map[int32]time.Time{},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.malformed, m.truncated, m.invalid} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("pgactivity: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// Counts returns the totals since NewMetrics: statements with a malformed
// comment, and statements cut with their tags lost.
func (m *Metrics) Counts() (malformed, truncated uint64) {
	if m == nil {
		return 0, 0
	}
	return m.nMalformed.Load(), m.nCut.Load()
}

// InvalidTenants returns the statements since NewMetrics whose tenant was
// not a valid name (Backend.InvalidTenant).
func (m *Metrics) InvalidTenants() uint64 {
	if m == nil {
		return 0
	}
	return m.nInvalid.Load()
}

// observe counts the new unreadable statements, and those with an
// invalid tenant, of one snapshot.
func (m *Metrics) observe(s *Snapshot) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.next)
	for i := range s.Backends {
		b := &s.Backends[i]
		invalid := b.InvalidTenant()
		if !b.Malformed && !b.TagsCut && !invalid {
			continue
		}
		m.next[b.PID] = b.QueryStart
		if st, ok := m.seen[b.PID]; ok && st.Equal(b.QueryStart) {
			continue
		}
		switch {
		case b.TagsCut:
			m.truncated.Inc()
			m.nCut.Add(1)
		case b.Malformed:
			m.malformed.Inc()
			m.nMalformed.Add(1)
		}
		if invalid {
			m.invalid.Inc()
			m.nInvalid.Add(1)
		}
	}
	m.seen, m.next = m.next, m.seen
}
