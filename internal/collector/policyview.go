package collector

import (
	"context"
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
// The policy's index is built once per version (and again when a rule
// in it expires); a view then costs a map lookup per tenant of the
// report. Its lock is taken after the server's and before the policy's.
type policyView struct {
	pol *policyPart

	mu      sync.Mutex
	index   *policy.Index
	tenants []string // scratch
}

func (v *policyView) merge(*report.Report, time.Time, bool) {}
func (v *policyView) snapshot(*api.Snapshot, time.Time)     {}
func (v *policyView) tick(context.Context, time.Time)       {}

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
	v.tenants = v.tenants[:0]
	for i := range rep.Rows {
		if t := rep.Rows[i].Tenant; t != "" && (len(v.tenants) == 0 || v.tenants[len(v.tenants)-1] != t) {
			v.tenants = append(v.tenants, t)
		}
	}
	_, js, err := v.index.ViewFor(v.tenants, held.Tag, 0)
	if err != nil {
		return reply
	}
	reply.Policy, reply.PolicyView = nil, js
	return reply
}
