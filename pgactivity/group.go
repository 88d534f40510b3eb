package pgactivity

import (
	"slices"
	"strings"

	"github.com/qtop-dev/qtop/tenant"
)

// AggregatorOption configures NewAggregator.
type AggregatorOption func(*Aggregator)

// GroupBy makes an Aggregator account the load under key(tags) instead of
// the tenant (TenantLoad.Tenant then holds the key): by application,
// user, database, client or statement, say. tags is the session a backend
// works for: the backend itself, or for a parallel worker its leader when
// the snapshot holds it, so that a worker counts under its leader's
// session fields, route and tier.
func GroupBy(key func(tags *Backend) string) AggregatorOption {
	return func(a *Aggregator) { a.key = key }
}

// index maps the pids of s to their index in s.Backends (a.byPID).
func (a *Aggregator) index(s Snapshot) {
	clear(a.byPID)
	for i := range s.Backends {
		a.byPID[s.Backends[i].PID] = i
	}
}

// session is the backend whose session fields and tags b's load counts
// under: b, or its leader when b is a parallel worker and s holds the
// leader (a.index(s) first).
func (a *Aggregator) session(s Snapshot, b *Backend) *Backend {
	if b.LeaderPID == 0 {
		return b
	}
	if j, ok := a.byPID[b.LeaderPID]; ok {
		return &s.Backends[j]
	}
	return b
}

// MergeTenants returns the tenants' load over consecutive windows as one
// window's: each AAS, wait and route weighted by its window's samples,
// Longest the longest, Statements summed (a statement running across
// windows counts in each), Tier the last set; sorted as Window.Tenants.
// Cutting a window per sample and merging the last n gives the load over
// a sliding window of n samples.
func MergeTenants(ws ...Window) []TenantLoad {
	samples := 0
	for _, w := range ws {
		samples += w.Samples
	}
	if samples == 0 {
		return nil
	}
	byName := map[string]*TenantLoad{}
	for _, w := range ws {
		n := float64(w.Samples)
		for _, l := range w.Tenants {
			m := byName[l.Tenant]
			if m == nil {
				m = &TenantLoad{Tenant: l.Tenant, Waits: map[string]float64{}, Routes: map[string]float64{}}
				byName[l.Tenant] = m
			}
			m.AAS += l.AAS * n
			for k, v := range l.Waits {
				m.Waits[k] += v * n
			}
			for k, v := range l.Routes {
				m.Routes[k] += v * n
			}
			m.Longest = max(m.Longest, l.Longest)
			m.Statements += l.Statements
			if l.Tier != tenant.TierUnset {
				m.Tier = l.Tier
			}
		}
	}
	out := make([]TenantLoad, 0, len(byName))
	n := float64(samples)
	for _, m := range byName {
		m.AAS /= n
		for k := range m.Waits {
			m.Waits[k] /= n
		}
		for k := range m.Routes {
			m.Routes[k] /= n
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(x, y TenantLoad) int {
		if x.AAS != y.AAS {
			if x.AAS > y.AAS {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Tenant, y.Tenant)
	})
	return out
}
