package meter

import (
	"encoding/json"
	"fmt"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// A reporter that applies policies (WithPolicyHandler) and was given
// WithPolicyView asks for its own view
// of the policy: every report carries the tag of the view it holds
// (report.PolicyView), and the collector answers with the rules of the
// tenants it reported, every tier rule, the budgets, runaway rules and
// freshness — or with "unchanged" while that is the view it holds. A
// collector of an older release skips the section and sends the whole
// policy, which is applied as before.

// heldView is the section announcing the view the reporter holds.
func (r *Reporter) heldView() report.PolicyView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return report.PolicyView{Tag: r.held.viewTag}
}

// viewPolicy decodes the view of a reply into the policy it stands for
// and its tag; nil when the view is unchanged.
func viewPolicy(b []byte) (*policy.Policy, string, error) {
	var v policy.View
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, "", fmt.Errorf("%w: reply policy view: %v", report.ErrMalformed, err)
	}
	if len(v.Tag) > report.MaxPolicyTagLen {
		return nil, "", fmt.Errorf("%w: reply policy view tag of %d bytes", report.ErrMalformed, len(v.Tag))
	}
	if v.Unchanged {
		return nil, v.Tag, nil
	}
	return &policy.Policy{Version: v.Version, Rules: v.Rules, Budgets: v.Budgets, Runaway: v.Runaway, Freshness: v.Freshness}, v.Tag, nil
}

// applyView applies the policy of a view: a newer version, or the same
// version with another tag (the process reported a tenant with rules it
// did not hold). An older version (a collector behind) is ignored.
func (r *Reporter) applyView(p *policy.Policy, tag string) {
	if p == nil || r.cfg.onPolicy == nil {
		return
	}
	r.mu.Lock()
	if r.held.have && (p.Version < r.held.version || p.Version == r.held.version && tag == r.held.viewTag) {
		r.mu.Unlock()
		return
	}
	r.held.have, r.held.version, r.held.viewTag = true, p.Version, tag
	r.mu.Unlock()
	if r.m != nil {
		r.m.policies.Inc()
	}
	r.cfg.onPolicy(*p)
}
