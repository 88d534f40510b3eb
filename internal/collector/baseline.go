package collector

import (
	"context"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Baselines in the collector: the same for every qtop that reads it, so
// that the headline's victims do not depend on when a qtop started or
// whether it restarted. Each second the live view (tenants by RU, as the
// autopilot reads it) adds each tenant's p95 and share of RU to the
// minute it falls in; a tenant's baseline is the median, over the
// complete minutes of the trailing hour except the last baselineGap
// (which an incident under way would fill), of those minutes' means —
// once at least baselineMinutes such minutes exist. The live view then
// carries it (api.TenantRow.BaselineP95Seconds, BaselineShare) and qtop
// judges victims against it ("baselines: collector"). Kept in memory: a
// collector that restarts learns them again (the store's minutes hold no
// p95).
const (
	baselineSlots   = 60 // minutes of the trailing hour
	baselineGap     = 3  // the latest minutes left out of a baseline
	baselineMinutes = 5  // complete minutes needed before a baseline is served
	// maxBaselineTenants bounds the tenants followed (the live view the
	// book reads has at most maxTop rows).
	maxBaselineTenants = 2 * maxTop
)

// baselineBook holds every followed tenant's minutes and the baselines
// computed from them at the last minute's turn.
type baselineBook struct {
	// gap and need are baselineGap and baselineMinutes (tests shorten
	// them).
	gap, need int64
	mu        sync.Mutex
	minute    int64 // the minute being filled (unix minutes)
	tenants   map[string]*tenantMinutes
	served    map[string][2]float64 // p95 seconds, share of RU: the baselines served
}

// tenantMinutes is one tenant's ring of minutes.
type tenantMinutes struct {
	at         [baselineSlots]int64 // the minute a slot holds
	p95, share [baselineSlots]float64
	n          [baselineSlots]int
	lastMinute int64
}

func newBaselineBook() *baselineBook {
	return &baselineBook{gap: baselineGap, need: baselineMinutes, tenants: map[string]*tenantMinutes{}, served: map[string][2]float64{}}
}

// add takes one live snapshot (tenants by RU, the most rows).
func (b *baselineBook) add(s *api.Snapshot) {
	m := s.Time.Unix() / 60
	var total float64
	for i := range s.Tenants {
		total += s.Tenants[i].RUPerSec
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if m != b.minute {
		b.turn(m)
	}
	if total <= 0 {
		return
	}
	for i := range s.Tenants {
		r := &s.Tenants[i]
		if r.P95Seconds <= 0 || r.Untagged || r.Tenant == api.OtherTenant || tenant.ValidateTenant(r.Tenant) != nil {
			continue
		}
		tm := b.tenants[r.Tenant]
		if tm == nil {
			if len(b.tenants) >= maxBaselineTenants {
				continue
			}
			tm = &tenantMinutes{}
			b.tenants[r.Tenant] = tm
		}
		slot := m % baselineSlots
		if tm.at[slot] != m {
			tm.at[slot], tm.p95[slot], tm.share[slot], tm.n[slot] = m, 0, 0, 0
		}
		tm.p95[slot] += r.P95Seconds
		tm.share[slot] += r.RUPerSec / total
		tm.n[slot]++
		tm.lastMinute = m
	}
}

// turn starts minute m: the baselines are computed again from the
// complete minutes, and tenants idle for the whole hour are forgotten.
func (b *baselineBook) turn(m int64) {
	b.minute = m
	clear(b.served)
	var ps, ss []float64
	for name, tm := range b.tenants {
		if m-tm.lastMinute > baselineSlots {
			delete(b.tenants, name)
			continue
		}
		ps, ss = ps[:0], ss[:0]
		for i := range baselineSlots {
			if at := tm.at[i]; tm.n[i] > 0 && at >= m-baselineSlots && at < m-b.gap {
				ps = append(ps, tm.p95[i]/float64(tm.n[i]))
				ss = append(ss, tm.share[i]/float64(tm.n[i]))
			}
		}
		if int64(len(ps)) < b.need {
			continue
		}
		b.served[name] = [2]float64{median(ps), median(ss)}
	}
}

// median of v (reordered), as the headline takes its quantiles.
func median(v []float64) float64 { return incident.Quantile(v, 0.5) }

// snapshot gives the live view's tenant rows their baselines.
func (b *baselineBook) snapshot(snap *api.Snapshot, _ time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.served) == 0 || (snap.GroupBy != "" && snap.GroupBy != api.GroupTenant) {
		return
	}
	for i := range snap.Tenants {
		r := &snap.Tenants[i]
		if bl, ok := b.served[r.Tenant]; ok && !r.Untagged {
			r.BaselineP95Seconds, r.BaselineShare = bl[0], bl[1]
		}
	}
}

var _ feature = (*baselineBook)(nil)

func (b *baselineBook) merge(*report.Report, time.Time, bool) {}
func (b *baselineBook) reply(_ *report.Report, _ time.Time, r report.Reply, _ bool) report.Reply {
	return r
}
func (b *baselineBook) tick(context.Context, time.Time) {}
