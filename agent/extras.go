package agent

import (
	"net/http"
	"time"

	"github.com/qtop-dev/qtop/freshness"
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
// freshness.New.
func WithFreshness(signer *freshness.ETagSigner, opts ...freshness.Option) Option {
	return func(c *config) { c.freshSigner, c.freshOpts = signer, opts }
}

// Freshness returns the agent's freshness shedder, nil without
// WithFreshness (for its metrics and tests).
func (a *Agent) Freshness() *freshness.Shedder { return a.fresh }

// newFreshness makes the shedder once the enforcer and the queue exist.
func (a *Agent) newFreshness() error {
	if a.cfg.freshSigner == nil {
		return nil
	}
	opts := append([]freshness.Option{freshness.WithOverloadOf(a.enf, a.queue)}, a.cfg.freshOpts...)
	if a.cfg.reg != nil {
		opts = append(opts, freshness.WithRegisterer(a.cfg.reg))
	}
	f, err := freshness.New(a.cfg.freshSigner, opts...)
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
		out = append(out, meter.WithSectionSource(a.cfg.budgets.WindowSource()))
	}
	if a.fresh != nil {
		out = append(out, meter.WithSectionSource(freshness.Source(a.fresh)))
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
