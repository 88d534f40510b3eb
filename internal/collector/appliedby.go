package collector

import (
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// appliedByWindow is how recently a source must have reported to count
// as a process that applies the policy.
const appliedByWindow = 2 * time.Minute

// appliedBy counts the sources that reported within appliedByWindow of
// now by kind: distinct OTLP services, agent and gate processes, and the
// processes that sent a budgets section (sqlcomment's WindowSource sends
// one at least every WindowHeartbeat reports). The server's lock is held.
func (in *intake) appliedBy(now time.Time) api.AppliedBy {
	var a api.AppliedBy
	otlp := map[string]bool{}
	for _, src := range in.sources {
		// A source only replayed from the log (a process of before a
		// restart, since gone) is not one that applies the policy now.
		if now.Sub(src.heard) > appliedByWindow {
			continue
		}
		if now.Sub(src.budgets) <= appliedByWindow {
			a.Budgets++
		}
		service, rest, _ := strings.Cut(src.key, "\x00")
		instance, _, _ := strings.Cut(rest, "\x00")
		switch (report.Source{Service: service, Instance: instance}).Kind() {
		case report.SourceOTLP:
			otlp[service] = true
		case report.SourceGate:
			a.Gates++
		default:
			a.Agents++
		}
	}
	a.OTLPServices = len(otlp)
	return a
}

// policyStatus is GET /v1/policy's answer: the policy with who applies it.
func (s *Server) policyStatus() api.PolicyStatus {
	s.mu.Lock()
	now := s.cfg.Now()
	a := s.in.appliedBy(now)
	s.mu.Unlock()
	a.RateLimitService = s.rls.usedSince(now.Add(-appliedByWindow))
	p := s.Policy()
	return api.PolicyStatus{Policy: p, AppliedBy: a, Note: a.PolicyNote(p), Unapplied: s.Live().Unapplied}
}
