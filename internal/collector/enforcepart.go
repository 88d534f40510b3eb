package collector

import (
	"context"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// enforcePart is the feature of the reports' enforcement detail and pool
// waits: each second's counters summed over processes, for the live
// view's enforcement and pool-wait tables and the enforcement metrics.
// Its lock guards the seconds.
type enforcePart struct {
	met *enforcementMetrics

	mu  sync.Mutex
	enf [ringN]enfSlot
}

var _ feature = (*enforcePart)(nil)

// enfSlot is one second of enforcement counters summed over processes.
type enfSlot struct {
	stamp int64
	e     report.Enforcement
	drop  report.EnforcementDetail   // CoDel drops only (the pool waits are in pool)
	pool  map[string]report.PoolWait // poolwait.go
}

// merge adds a report's enforcement counters and pool waits (received
// live) to its second. It is the one place, with shedLevel, that reads
// the report's enforcement and pool-wait sections.
func (p *enforcePart) merge(rep *report.Report, now time.Time, live bool) {
	if !live {
		return
	}
	e := &rep.Enforcement
	detail, _ := report.SectionOf[report.EnforcementDetail](rep)
	p.met.add(e, &detail)
	sec := now.Unix()
	p.mu.Lock()
	defer p.mu.Unlock()
	es := &p.enf[int(uint64(sec)%ringN)]
	if es.stamp != sec {
		*es = enfSlot{stamp: sec}
	}
	es.addPool(detail.PoolWait)
	for t := range tenant.NumTiers {
		es.e.Admitted[t] += e.Admitted[t]
		es.e.Throttled[t] += e.Throttled[t]
		es.e.Shed[t] += e.Shed[t]
		es.e.ShadowThrottled[t] += e.ShadowThrottled[t]
		es.e.ShadowShed[t] += e.ShadowShed[t]
		es.drop.Dropped[t] += detail.Dropped[t]
		es.drop.ShadowDropped[t] += detail.ShadowDropped[t]
		es.e.PriceMultiplier[t] = max(es.e.PriceMultiplier[t], e.PriceMultiplier[t])
	}
}

// shedLevel is how deep a report's process sheds: the number of tiers
// from the least critical one down to the most critical tier (but T0) it
// shed or priced.
func shedLevel(e *report.Enforcement) int {
	level := 0
	for t := 1; t < tenant.NumTiers; t++ {
		if e.Shed[t] > 0 || e.PriceMultiplier[t] > 1 {
			level = max(level, tenant.NumTiers-t)
		}
	}
	return level
}

// snapshot fills the enforcement per tier and the pool waits over the
// last rateN complete seconds.
func (p *enforcePart) snapshot(snap *api.Snapshot, now time.Time) {
	sec := now.Unix()
	p.mu.Lock()
	defer p.mu.Unlock()
	for t := range tenant.NumTiers {
		tr := &snap.Enforcement.Tiers[t]
		tr.Tier = tenant.Tier(t + 1).String()
		tr.PriceMultiplier = 1
		for j := range ringN {
			es := &p.enf[j]
			if es.stamp < sec-rateN || es.stamp >= sec {
				continue
			}
			tr.PriceMultiplier = max(tr.PriceMultiplier, es.e.PriceMultiplier[t])
			tr.Admitted += es.e.Admitted[t]
			tr.Throttled += es.e.Throttled[t]
			tr.Shed += es.e.Shed[t]
			tr.ShadowThrottled += es.e.ShadowThrottled[t]
			tr.ShadowShed += es.e.ShadowShed[t]
			tr.Dropped += es.drop.Dropped[t]
			tr.ShadowDropped += es.drop.ShadowDropped[t]
		}
	}
	snap.PoolWait = poolRows(&p.enf, sec)
}

func (p *enforcePart) reply(_ *report.Report, _ time.Time, reply report.Reply, _ bool) report.Reply {
	return reply
}
func (p *enforcePart) tick(context.Context, time.Time) {}
