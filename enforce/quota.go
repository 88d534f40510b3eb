package enforce

import (
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/tenant"
)

// WithQuota has the Enforcer apply the fleet-wide quota verdicts that g
// holds (package quota; the ingest Reporter keeps g up to date with
// ingest.WithQuota). The bucket stage asks g after the tenant's own
// per-process bucket, which stays as defence in depth and is all that
// applies once a verdict expires; ChargeAt charges g too. A shadow
// verdict is counted as a shadow throttle.
func WithQuota(g *quota.Gate) Option { return func(c *config) { c.quota = g } }

// allowQuota is the quota part of AllowAt: it asks the gate about work
// the bucket admitted, and counts work the bucket refused in the gate's
// usage (the fleet's demand includes it).
func (e *Enforcer) allowQuota(now time.Time, tags tenant.Tags, tier tenant.Tier, c *tierCounters, bucketOK bool, wait time.Duration) (bool, time.Duration) {
	tags.Tier = tier
	if !bucketOK {
		e.cfg.quota.RefusedElsewhere(tags)
		return false, wait
	}
	d := e.cfg.quota.AllowAt(now, tags)
	if d.Shadow {
		c.shadowThrottled.Add(1)
		e.logShadow(RuleBucket, tags, tier, Throttle)
	}
	return d.Admit, d.RetryAfter
}
