package collector

import (
	"cmp"
	"slices"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// maxPoolTenants bounds the tenants one second of pool waits holds; the
// others are summed under ingest.OtherTenant.
const maxPoolTenants = 1024

// addPool sums a report's pool waits into the second.
func (es *enfSlot) addPool(pw []report.PoolWait) {
	if len(pw) == 0 {
		return
	}
	if es.pool == nil {
		es.pool = make(map[string]report.PoolWait, len(pw))
	}
	for _, p := range pw {
		name := p.Tenant
		cur, ok := es.pool[name]
		if !ok && len(es.pool) >= maxPoolTenants {
			name = report.OtherTenant
			cur = es.pool[name]
		}
		if cur.Tenant == "" {
			cur.Tenant = string([]byte(name)) // not a view of the report's buffer
		}
		cur.Count += p.Count
		cur.Wait += p.Wait
		cur.Max = max(cur.Max, p.Max)
		es.pool[cur.Tenant] = cur
	}
}

// poolRows sums the pool waits of the complete seconds of the window
// ending at sec, per tenant, most waited first.
func poolRows(slots *[ringN]enfSlot, sec int64) []api.PoolWaitRow {
	sum := map[string]*api.PoolWaitRow{}
	for j := range slots {
		es := &slots[j]
		if es.stamp < sec-rateN || es.stamp >= sec {
			continue
		}
		for name, p := range es.pool {
			r := sum[name]
			if r == nil {
				r = &api.PoolWaitRow{Tenant: name}
				sum[name] = r
			}
			r.WaitPerSec += p.Wait.Seconds() / rateN
			r.AcquirePerSec += float64(p.Count) / rateN
			r.MaxSeconds = max(r.MaxSeconds, p.Max.Seconds())
		}
	}
	if len(sum) == 0 {
		return nil
	}
	out := make([]api.PoolWaitRow, 0, len(sum))
	for _, r := range sum {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b api.PoolWaitRow) int {
		if c := cmp.Compare(b.WaitPerSec, a.WaitPerSec); c != 0 {
			return c
		}
		return cmp.Compare(a.Tenant, b.Tenant)
	})
	return out[:min(len(out), api.MaxPoolWaitRows)]
}
