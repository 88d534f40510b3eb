package agent

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// poolWaits sums connection-pool waits per tenant over a report window,
// for at most max tenants (the others under ingest.OtherTenant).
type poolWaits struct {
	mu  sync.Mutex
	max int
	m   map[string]*report.PoolWait
}

func (p *poolWaits) add(t string, d time.Duration) {
	if d < 0 {
		d = 0
	}
	if t == "" {
		t = report.UnknownTenant
	}
	t = tenant.Escape(t) // a tenant named "other" waits apart from the others
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[string]*report.PoolWait)
	}
	w := p.m[t]
	if w == nil {
		if len(p.m) >= p.max-1 {
			t = report.OtherTenant
			w = p.m[t]
		}
		if w == nil {
			w = &report.PoolWait{Tenant: t}
			p.m[t] = w
		}
	}
	w.Count++
	w.Wait += d
	w.Max = max(w.Max, d)
}

// take returns the window's waits, most waited first, and starts a new
// window.
func (p *poolWaits) take() []report.PoolWait {
	p.mu.Lock()
	m := p.m
	p.m = nil
	p.mu.Unlock()
	if len(m) == 0 {
		return nil
	}
	out := make([]report.PoolWait, 0, len(m))
	for _, w := range m {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b report.PoolWait) int {
		if c := cmp.Compare(b.Wait, a.Wait); c != 0 {
			return c
		}
		return cmp.Compare(a.Tenant, b.Tenant)
	})
	return out
}
