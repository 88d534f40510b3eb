package collector

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// policyView is the feature that answers a process announcing the policy
// view it holds (report.PolicyView) with its own part of the policy
// (policy.View: the rules of the tenants it reported, every tier rule,
// the budgets, runaway rules and freshness) instead of the whole policy,
// or with "unchanged" while that part is the view it holds. A process
// that does not send the section gets the whole policy, as before.
//
// The view holds the rules of the tenants each process reported over the
// last viewKeep, not only in this report: a tenant idle for a few report
// intervals keeps its throttle in the process (with the report's tenants
// alone it lost it for as long as it was idle, and its first requests
// after were served unlimited). A tenant a process has never reported
// gets its rules with the first report that carries it — unless a rule
// of it was made in the last viewKeep: every process gets new rules at
// once (an operator's throttle applies everywhere in one report
// interval), and keeps them while they are new or the tenant is seen.
//
// The policy's index is built once per version (and again when a rule
// in it expires); a view then costs a map lookup per tenant of the
// report and of the process's recent ones. Its lock is taken after the
// server's and before the policy's.
type policyView struct {
	pol *policyPart

	mu      sync.Mutex
	index   *policy.Index
	tenants []string // scratch
	// recent are each process's tenants with the unix second each was
	// last reported (at most maxViewTenants a process, maxViewSources
	// processes; swept by tick).
	recent map[report.Source]map[string]int64
	swept  int64
}

// The memory of the policy view (see policyView).
const (
	viewKeep       = 5 * time.Minute
	maxViewTenants = 10_000
	maxViewSources = 20_000
)

func (v *policyView) merge(*report.Report, time.Time, bool) {}
func (v *policyView) snapshot(*api.Snapshot, time.Time)     {}

// tick forgets, once a minute, the tenants (and processes) not reported
// for viewKeep.
func (v *policyView) tick(_ context.Context, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	sec := now.Unix()
	if sec-v.swept < 60 {
		return
	}
	v.swept = sec
	for src, ts := range v.recent {
		for t, at := range ts {
			if sec-at > int64(viewKeep/time.Second) {
				delete(ts, t)
			}
		}
		if len(ts) == 0 {
			delete(v.recent, src)
		}
	}
}

// reply replaces the whole policy by the process's view when its report
// asked for one.
func (v *policyView) reply(rep *report.Report, now time.Time, reply report.Reply, merged bool) report.Reply {
	held, ok := report.SectionOf[report.PolicyView](rep)
	if !ok || !reply.Accepted {
		return reply
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var version uint64
	v.pol.read(func(p *policy.Policy) { version = p.Version })
	if v.index == nil || !v.index.Valid(version, now) {
		x, err := v.pol.current().Index(now)
		if err != nil {
			return reply // the whole policy, as without the section
		}
		v.index = x
	}
	v.tenants = v.withRules(rep, now, v.tenants[:0])
	_, js, err := v.index.ViewFor(v.tenants, held.Tag, 0)
	if err != nil {
		return reply
	}
	reply.Policy, reply.PolicyView = nil, js
	return reply
}

// withRules appends to dst the tenants of rep and those its process
// reported over the last viewKeep that have rules, sorted, then the other
// tenants with a rule made in that time, sorted (the view's tag follows
// the order), and remembers rep's. v.mu is held.
func (v *policyView) withRules(rep *report.Report, now time.Time, dst []string) []string {
	if v.recent == nil {
		v.recent = map[report.Source]map[string]int64{}
	}
	ts := v.recent[rep.Source]
	if ts == nil && len(v.recent) < maxViewSources {
		ts = map[string]int64{}
		v.recent[rep.Source] = ts
	}
	sec := now.Unix()
	for i := range rep.Rows {
		t := rep.Rows[i].Tenant
		if t == "" {
			continue
		}
		if _, ok := ts[t]; ok || (ts != nil && len(ts) < maxViewTenants) {
			ts[t] = sec
		} else if v.index.HasRules(t) {
			dst = append(dst, t) // beyond the memory: this report's still count
		}
	}
	for t, at := range ts {
		if sec-at <= int64(viewKeep/time.Second) && v.index.HasRules(t) {
			dst = append(dst, t)
		}
	}
	slices.Sort(dst)
	dst = slices.Compact(dst)
	// New rules of other tenants after the process's own, so that the
	// view's byte bound never cuts the process's own tenants' rules.
	own := len(dst)
	dst = v.index.ChangedSince(dst, now.Add(-viewKeep))
	news := dst[own:]
	slices.Sort(news)
	news = slices.Compact(news)
	n := own
	for _, t := range news {
		if _, found := slices.BinarySearch(dst[:own], t); !found {
			dst[n] = t
			n++
		}
	}
	return dst[:n]
}
