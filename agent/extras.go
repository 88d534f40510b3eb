package agent

import (
	"net/http"
	"time"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
)

// WithBudgets applies the database budgets and runaway rules of b to every
// statement the agent's database handles send (OpenDB, WrapConnector,
// OpenPgxPool), keeps b's rules current from the collector's policy, and
// reports b's counters and runaway actions to the collector, so qtop's
// Enforcement view shows them. See sqlcomment.NewBudgets.
func WithBudgets(b *sqlcomment.Budgets) Option { return func(c *config) { c.budgets = b } }

// WithFreshness puts the freshness shedder in front of Handler: under
// overload (this agent's latency-ratio price level or CoDel queue, or a
// batch forced from qtop), GETs whose client already holds a recent
// answer get 304 Not Modified without running the handler, by the rules
// of the collector's policy (policy.Freshness). The agent makes the
// shedder with signer and opts, gates it on its own enforcer and queue,
// keeps its rules current and reports its samples and counters. See
// enforce.NewFreshness.
func WithFreshness(signer *enforce.ETagSigner, opts ...enforce.FreshnessOption) Option {
	return func(c *config) { c.freshSigner, c.freshOpts = signer, opts }
}

// Freshness returns the agent's freshness shedder, nil without
// WithFreshness (for its metrics and tests).
func (a *Agent) Freshness() *enforce.Freshness { return a.fresh }

// newFreshness makes the shedder once the enforcer and the queue exist.
func (a *Agent) newFreshness() error {
	if a.cfg.freshSigner == nil {
		return nil
	}
	opts := append([]enforce.FreshnessOption{enforce.WithOverloadOf(a.enf, a.queue)}, a.cfg.freshOpts...)
	if a.cfg.reg != nil {
		opts = append(opts, enforce.WithFreshnessRegisterer(a.cfg.reg))
	}
	f, err := enforce.NewFreshness(a.cfg.freshSigner, opts...)
	if err != nil {
		return err
	}
	a.fresh = f
	return nil
}

// applyPolicy hands the collector's policy to every part that enforces it.
func (a *Agent) applyPolicy(p policy.Policy) {
	a.enf.ApplyPolicy(p)
	if b := a.cfg.budgets; b != nil {
		if err := b.SetPolicy(p, time.Now()); err != nil {
			a.cfg.logger.Warn("agent: database budgets of the policy refused", "version", p.Version, "err", err)
		}
	}
	if a.fresh != nil {
		a.fresh.ApplyPolicy(p)
	}
}

// reportOptions are the reporter options of the optional parts.
func (a *Agent) reportOptions() []meter.ReporterOption {
	var out []meter.ReporterOption
	if a.cfg.budgets != nil {
		out = append(out, meter.WithBudgetSource(meter.BudgetSource(a.cfg.budgets)))
	}
	if a.fresh != nil {
		out = append(out, meter.WithFreshnessSource(FreshnessSource(a.fresh)))
	}
	return out
}

// wrapFreshness puts the shedder, if any, in front of h.
func (a *Agent) wrapFreshness(h http.Handler) http.Handler {
	if a.fresh == nil {
		return h
	}
	return a.fresh.Wrap(h)
}

// FreshnessSource returns what ingest.WithFreshnessSource takes for a
// shedder made without the agent: each call drains f's window into a
// report's freshness section (the two packages' types match field for
// field; neither imports the other). WithFreshness does this itself.
func FreshnessSource(f *enforce.Freshness) func() *meter.Freshness {
	return func() *meter.Freshness {
		w := f.Drain()
		if w.Empty() {
			return nil
		}
		out := &meter.Freshness{SamplesDropped: w.SamplesDropped,
			Samples: make([]meter.FreshSample, len(w.Samples)),
			Routes:  make([]meter.FreshRoute, len(w.Routes)),
			Rules:   make([]meter.FreshRule, len(w.Rules))}
		for i, s := range w.Samples {
			out.Samples[i] = meter.FreshSample(s)
		}
		for i, r := range w.Routes {
			out.Routes[i] = meter.FreshRoute(r)
		}
		for i, r := range w.Rules {
			out.Rules[i] = meter.FreshRule(r)
		}
		return out
	}
}
