package autopilot

import (
	"slices"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// resources are the resources followed, in a fixed order.
var resources = [...]policy.Resource{policy.ResourceRU, policy.ResourceDB, policy.ResourcePoolWait, policy.ResourceWorkers}

// series is one tenant's load of one resource, one point per snapshot,
// oldest first (at most api.HistoryLen).
type series struct {
	v    []float64
	busy int64 // the last snapshot with load
}

// loads follows every tagged tenant's load of every resource, as the
// engine saw it, so that a resource the snapshot keeps no history of
// (pool wait, workers) still has a baseline.
type loads struct {
	n    int64
	kept int // snapshots taken into the series (past a collector's first Window)
	own  [len(resources)]map[string]*series
	now  [len(resources)]map[string]float64
	tot  [len(resources)]float64
	row  map[string]int // index in the snapshot's Tenants of each tagged tenant
}

// add takes a snapshot's figures.
func (l *loads) add(s *api.Snapshot) {
	l.n++
	for i := range resources {
		if l.own[i] == nil {
			l.own[i] = map[string]*series{}
		}
		l.now[i], l.tot[i] = map[string]float64{}, 0
	}
	l.row = make(map[string]int, len(s.Tenants))
	for i, r := range s.Tenants {
		l.tot[0] += r.RUPerSec
		l.tot[1] += r.DBLoad
		if tagged(s, &r) {
			l.now[0][r.Tenant] = r.RUPerSec
			l.now[1][r.Tenant] = r.DBLoad
			l.row[r.Tenant] = i
		}
	}
	for _, p := range s.PoolWait {
		l.tot[2] += p.WaitPerSec
		if tenant.ValidateTenant(p.Tenant) == nil {
			l.now[2][p.Tenant] += p.WaitPerSec
		}
	}
	for _, st := range s.Statements {
		l.tot[3] += float64(st.Workers)
		if st.Workers > 0 && tenant.ValidateTenant(st.Tenant) == nil {
			l.now[3][st.Tenant] += float64(st.Workers)
		}
	}
	if filling(s) {
		// Every tenant's rate climbs then, and would look like a rise
		// against those seconds. (The snapshot's own per-second History
		// has no such climb.)
		return
	}
	l.kept++
	for i := range resources {
		for t, sr := range l.own[i] {
			if _, ok := l.now[i][t]; !ok {
				sr.add(0, l.n, false)
			}
			if l.n-sr.busy > api.HistoryLen {
				delete(l.own[i], t)
			}
		}
		for t, v := range l.now[i] {
			sr := l.own[i][t]
			if sr == nil {
				if len(l.own[i]) >= incident.MaxTracked {
					continue
				}
				// It had no load the seconds before it appeared: zeros,
				// so that a tenant new within the baseline's span is new
				// load (the median tenant's baseline), not one whose
				// ramp-up in its first seconds is its baseline.
				sr = &series{v: make([]float64, min(l.kept-1, api.HistoryLen-1), api.HistoryLen)}
				l.own[i][t] = sr
			}
			sr.add(v, l.n, v > 0)
		}
	}
}

func (s *series) add(v float64, n int64, busy bool) {
	if len(s.v) == api.HistoryLen {
		s.v = append(s.v[:0], s.v[1:]...)
	}
	s.v = append(s.v, v)
	if busy {
		s.busy = n
	}
}

// filling reports whether s is of a collector whose rates are not yet
// real: they are averages over its Window, which fills during its first
// seconds (after a restart too), so that they climb from nothing then.
func filling(s *api.Snapshot) bool {
	return s.Collector.Uptime > 0 && s.Collector.Uptime < s.Window
}

// tagged reports whether a row is one tenant's (not the untagged load,
// not "other", not another grouping) with a name a policy can hold.
func tagged(s *api.Snapshot, r *api.TenantRow) bool {
	return (s.GroupBy == "" || s.GroupBy == api.GroupTenant) && !r.Untagged && r.Tenant != api.OtherTenant &&
		tenant.ValidateTenant(r.Tenant) == nil
}

func index(res policy.Resource) int {
	for i, r := range resources {
		if r == res {
			return i
		}
	}
	return 0
}

// figures is a tenant's load of res now, its share, and its baseline and
// recent load (incident.SplitOf: the means qtop's headline compares) from
// the longest history at hand: the snapshot's own (for RU or DB load,
// when it is of that measure) or the engine's.
func (l *loads) figures(s *api.Snapshot, res policy.Resource, t string) (load, share, base, recent float64, ok bool) {
	load, share, h := l.history(s, res, t)
	base, recent, ok = incident.SplitOf(s, h)
	return load, share, base, recent, ok
}

// frozen is the baseline an action scales its limit from: the median of
// the tenant's load of res before the recent seconds, which an incident
// filling part of that span does not move as it moves the mean.
func (l *loads) frozen(s *api.Snapshot, res policy.Resource, t string) float64 {
	_, _, h := l.history(s, res, t)
	if len(h) <= incident.DriverRecent {
		return 0
	}
	return incident.Quantile(slices.Clone(h[:len(h)-incident.DriverRecent]), 0.5)
}

// history is a tenant's load of res now, its share, and the longest
// history of it at hand.
func (l *loads) history(s *api.Snapshot, res policy.Resource, t string) (load, share float64, h []float64) {
	i := index(res)
	load = l.now[i][t]
	if l.tot[i] > 0 {
		share = load / l.tot[i]
	}
	if sr := l.own[i][t]; sr != nil {
		h = sr.v
	}
	if src := l.sourceHistory(s, res, t); len(src) > len(h) {
		h = src
	}
	if up := int(s.Collector.Uptime / time.Second); s.Collector.Uptime > 0 && up < len(h) {
		h = h[len(h)-max(up, 1):]
	}
	return load, share, h
}

// sourceHistory is the row's History when it is of res (history cuts it
// to the seconds the collector has been up: one that restarted knows
// nothing before its start).
func (l *loads) sourceHistory(s *api.Snapshot, res policy.Resource, t string) []float64 {
	db := s.Measure == api.MeasureDB || s.Source == api.SourcePostgres
	if !(res == policy.ResourceRU && !db || res == policy.ResourceDB && db) || s.Source == api.SourcePostgres {
		return nil
	}
	i, ok := l.row[t]
	if !ok {
		return nil
	}
	return s.Tenants[i].History
}

// typical is the median load of res over the tagged tenants with load,
// t left out: the baseline given to new load.
func (l *loads) typical(res policy.Resource, t string) float64 {
	var v []float64
	for name, x := range l.now[index(res)] {
		if name != t && x > 0 {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	return incident.Quantile(v, 0.5)
}
