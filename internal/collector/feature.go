package collector

import (
	"context"
	"path/filepath"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// A feature is the collector's part for one section of a report: it
// merges the section, adds to the reply, adds to the live snapshot, and
// does its once-a-second work. Each feature holds its own lock, taken
// after the server's and before the policy's; the root calls every
// feature in a loop (features), so adding one does not touch the root.
//
// The hot methods (merge, reply) never block on I/O; tick may write to
// the store within ctx.
type feature interface {
	// merge merges rep's section, received at now; live is false on
	// replay of the write-ahead log (the live view is not rebuilt).
	merge(rep *report.Report, now time.Time, live bool)
	// reply returns reply with the feature's part for rep's process
	// added; merged is false for a duplicate.
	reply(rep *report.Report, now time.Time, reply report.Reply, merged bool) report.Reply
	// snapshot adds the feature's part of the live view at now.
	snapshot(snap *api.Snapshot, now time.Time)
	// tick is the once-a-second work.
	tick(ctx context.Context, now time.Time)
}

// features are the collector's features, by name for the root's few
// direct uses, and in the order the root calls them.
type features struct {
	quota *fleetQuota   // quota.go: fleet quotas (the reply's verdicts)
	bud   *budgetPart   // budgets.go, runaway.go: budgets and runaway rules
	fresh *freshPart    // freshness.go: repeats and freshness rules
	enf   *enforcePart  // enforcepart.go, poolwait.go: enforcement detail, pool waits
	pilot *pilotPart    // autopilot.go: the autopilot (its status in the live view)
	base  *baselineBook // baseline.go: tenants' baselines, served in the live view
	names *tenantNames  // names.go: the tenants behind session tagging's short ids
	all   []feature
}

func newFeatures(cfg Config, pol *policyPart, em *enforcementMetrics) (features, error) {
	var f features
	var err error
	if f.quota, err = newFleetQuota(cfg, pol); err != nil {
		return f, err
	}
	if f.bud, err = newBudgetPart(pol, cfg); err != nil {
		return f, err
	}
	f.fresh = &freshPart{pol: pol, now: cfg.Now}
	f.enf = &enforcePart{met: em}
	if f.pilot, err = newPilotPart(cfg, pol, f.quota); err != nil {
		return f, err
	}
	f.base = newBaselineBook()
	f.base.log = cfg.Logger
	if err := f.base.load(filepath.Join(cfg.DataDir, baselinesFile)); err != nil {
		cfg.Logger.Warn("baselines saved by the last run not read: they are learnt again", "err", err)
	}
	f.names = newTenantNames()
	f.all = []feature{f.fresh, f.bud, f.enf, f.quota, &policyView{pol: pol}, f.pilot, f.base, f.names}
	return f, nil
}

func (f *features) merge(rep *report.Report, now time.Time, live bool) {
	for _, x := range f.all {
		x.merge(rep, now, live)
	}
}

func (f *features) reply(rep *report.Report, now time.Time, reply report.Reply, merged bool) report.Reply {
	for _, x := range f.all {
		reply = x.reply(rep, now, reply, merged)
	}
	return reply
}

func (f *features) snapshot(snap *api.Snapshot, now time.Time) {
	for _, x := range f.all {
		x.snapshot(snap, now)
	}
}

func (f *features) tick(ctx context.Context, now time.Time) {
	for _, x := range f.all {
		x.tick(ctx, now)
	}
}
