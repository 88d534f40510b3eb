package tui

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// t0 is the fixed instant of every fixture.
var t0 = time.Date(2026, 3, 9, 9, 14, 7, 0, time.UTC)

// fakeSource is a Source of canned snapshots that records the actions it
// is asked to do. (It stands in for the UI's own interface, not for
// PostgreSQL or a collector: those are tested against real ones.)
type fakeSource struct {
	mu        sync.Mutex
	feats     Features
	snaps     chan api.Snapshot
	err       error
	queries   []Query
	throttles []policy.Rule
	cancels   []int32
	terms     []int32
	targets   []pgactivity.Target
	actors    []string
	moved     map[int32]bool
	closed    bool
	done      chan struct{}
}

func newFake(f Features) *fakeSource {
	return &fakeSource{feats: f, snaps: make(chan api.Snapshot, 16), done: make(chan struct{})}
}

func (f *fakeSource) Next(ctx context.Context, q Query) (api.Snapshot, error) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return api.Snapshot{}, err
	}
	select {
	case s := <-f.snaps:
		return s, nil
	case <-ctx.Done():
		return api.Snapshot{}, ctx.Err()
	case <-f.done:
		return api.Snapshot{}, ErrClosed
	}
}

func (f *fakeSource) Throttle(_ context.Context, r policy.Rule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.feats.Throttle {
		return ErrUnsupported
	}
	f.throttles = append(f.throttles, r)
	return nil
}

func (f *fakeSource) Cancel(_ context.Context, pid int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, pid)
	return nil
}

func (f *fakeSource) Terminate(_ context.Context, pid int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terms = append(f.terms, pid)
	return nil
}

// CancelStatement and TerminateSession record their targets; moved
// lists the pids whose backends "moved on".
func (f *fakeSource) CancelStatement(_ context.Context, t pgactivity.Target, actor string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actors = append(f.actors, actor)
	if f.moved[t.PID] {
		return fmt.Errorf("%w: backend %d", pgactivity.ErrMovedOn, t.PID)
	}
	f.cancels = append(f.cancels, t.PID)
	f.targets = append(f.targets, t)
	return nil
}

func (f *fakeSource) TerminateSession(_ context.Context, t pgactivity.Target, actor string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actors = append(f.actors, actor)
	if f.moved[t.PID] {
		return fmt.Errorf("%w: backend %d", pgactivity.ErrMovedOn, t.PID)
	}
	f.terms = append(f.terms, t.PID)
	f.targets = append(f.targets, t)
	return nil
}

func (f *fakeSource) Features() Features { return f.feats }
func (f *fakeSource) Describe() string   { return "fake" }
func (f *fakeSource) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	return nil
}

func asciiRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.Ascii)
	return r
}

func ramp(n int, to float64) []float64 {
	h := make([]float64, api.HistoryLen)
	for i := range n {
		h[api.HistoryLen-n+i] = to * float64(i+1) / float64(n)
	}
	return h
}

// incident is the snapshot of a noisy-neighbour incident: bigcorp's
// import takes half of the RU while the services' latency ratio falls.
func incident() api.Snapshot {
	s := api.Snapshot{
		Time: t0, Window: 10 * time.Second, Source: api.SourceCollector, Measure: api.MeasureRU, TenantsSeen: 42,
		Tenants: []api.TenantRow{
			{Tenant: "bigcorp", Tier: "T2", DBLoad: 12.7, RUPerSec: 4800, ReqPerSec: 12, P95Seconds: 1.84, Share: 0.55,
				Waits: map[string]float64{"CPU": 8.1, "IO": 4.6}, History: ramp(15, 4800),
				Routes: []api.RouteRow{{Route: "POST /catalog/import", DBLoad: 12.6, RUPerSec: 4790, ReqPerSec: 11.9, P95Seconds: 1.9}}},
			{Tenant: "acme", Tier: "T2", DBLoad: 1.39, RUPerSec: 786, ReqPerSec: 220, P95Seconds: 0.128, ErrPerSec: 1, Share: 0.09, History: ramp(120, 800),
				Routes: []api.RouteRow{{Route: "GET /products", DBLoad: 0.4, RUPerSec: 200, ReqPerSec: 55, P95Seconds: 0.12}}},
			{Tenant: "globex", Tier: "T1", DBLoad: 0.65, RUPerSec: 356, ReqPerSec: 101, P95Seconds: 0.123, ErrPerSec: 0.6, Share: 0.04, Throttled: true, History: ramp(60, 356)},
			{Tenant: "trust-safety", Tier: "T0", DBLoad: 0.04, RUPerSec: 19.5, ReqPerSec: 5.3, P95Seconds: 0.123, Share: 0.002, History: ramp(30, 20)},
			{Tenant: api.OtherTenant, DBLoad: 3.1, RUPerSec: 2800, ReqPerSec: 700, P95Seconds: 0.13, ErrPerSec: 2, Share: 0.318},
		},
		HotKeys: []api.HotKeyRow{
			{Key: "catalog:3", Tenant: "bigcorp", Count: 5367, Err: 12, Share: 0.195},
			{Key: "product:0", Tenant: "acme", Count: 2397, Share: 0.087},
			{Key: "product:1\x1b[31m", Tenant: "globex", Count: 1479, Err: 3, Share: 0.054},
		},
		Statements: []api.StatementRow{
			{PID: 4242, Tenant: "bigcorp", Route: "POST /catalog/import", State: "active", WaitEventType: "IO", WaitEvent: "DataFileRead",
				Duration: 41 * time.Second, Query: "INSERT INTO products SELECT * FROM staging /*tenant='bigcorp'*/",
				QueryStart: t0.Add(-41 * time.Second), BackendStart: t0.Add(-time.Hour)},
			{PID: 4243, Tenant: "bigcorp", Route: "POST /catalog/import", State: "active", Duration: 12 * time.Second, Query: "UPDATE stock\nSET n = n - 1",
				QueryStart: t0.Add(-12 * time.Second), BackendStart: t0.Add(-2 * time.Hour)},
			{PID: 5150, Tenant: "acme", Route: "GET /cart", State: "active", WaitEventType: "Lock", WaitEvent: "transactionid",
				Duration: 3 * time.Second, Query: "SELECT * FROM cart FOR UPDATE", BlockedBy: []int32{4243}},
		},
		Blocked: []api.BlockRow{
			{Blocked: api.StatementRow{PID: 5150, Tenant: "acme", Route: "GET /cart", State: "active", WaitEventType: "Lock", WaitEvent: "transactionid",
				Duration: 3 * time.Second, Query: "SELECT * FROM cart FOR UPDATE", BlockedBy: []int32{4243}},
				Blocking: api.StatementRow{PID: 4243, Tenant: "bigcorp", State: "active", WaitEventType: "Lock", WaitEvent: "tuple", Duration: 12 * time.Second,
					Query: "UPDATE stock SET n = n - 1", BlockedBy: []int32{7001}}},
			{Blocked: api.StatementRow{PID: 4243, Tenant: "bigcorp", State: "active", WaitEventType: "Lock", WaitEvent: "tuple", Duration: 12 * time.Second,
				Query: "UPDATE stock SET n = n - 1", BlockedBy: []int32{7001}},
				Blocking: api.StatementRow{PID: 7001, Tenant: "globex", State: "idle in transaction", WaitEventType: "Client", WaitEvent: "ClientRead",
					XactStart: t0.Add(-135 * time.Second), Query: "UPDATE stock SET reserved = true WHERE sku = $1"}},
			{Blocked: api.StatementRow{PID: 5151, State: "active", WaitEventType: "Lock", WaitEvent: "relation", Duration: 900 * time.Millisecond,
				Query: "VACUUM FULL stock", BlockedBy: []int32{7001}, LockWait: "AccessExclusiveLock on stock", Database: "shop",
				XactStart: t0.Add(-time.Second)},
				Blocking: api.StatementRow{PID: 7001}},
		},
		XminHolders: []api.StatementRow{
			{PID: 7001, Tenant: "globex", Application: "reports", State: "idle in transaction", XactStart: t0.Add(-135 * time.Second), XminAge: 48210,
				Query: "UPDATE stock SET reserved = true WHERE sku = $1"},
			{PID: 4242, Tenant: "bigcorp", Application: "catalog", State: "active", XactStart: t0.Add(-41 * time.Second), XminAge: 1290,
				Query: "INSERT INTO products SELECT * FROM staging"},
		},
		Services: []api.ServiceRow{
			{Service: "catalog-worker", Ratio: 0.42, History: ramp(30, 1), Enter: 0.5, Exit: 0.65, Degraded: true, ShedLevel: 2, ReqPerSec: 330, P95Seconds: 0.138, BaselineP95Seconds: 0.046, Processes: 3},
			{Service: "storefront-api", Ratio: 0.97, History: ramp(120, 1), Enter: 0.5, Exit: 0.65, ReqPerSec: 300, P95Seconds: 0.05, Processes: 3},
		},
		Policy: policy.Policy{Version: 3, Rules: []policy.Rule{
			{ID: "a1b2c3d4e5f6", Tenant: "globex", Action: policy.Throttle, RUPerSecond: 50, Expires: t0.Add(14 * time.Minute), Reason: "runaway report"},
			{ID: "tier3price", Tier: tenant.T3, Action: policy.Price, Multiplier: 4, Expires: t0.Add(time.Hour), Reason: "latency ratio below 0.5", Shadow: true},
		}},
	}
	for t := range tenant.NumTiers {
		s.Enforcement.Tiers[t] = api.TierRow{Tier: tenant.Tier(t + 1).String(), PriceMultiplier: 1, Admitted: uint64(1000 * (t + 1))}
	}
	s.Enforcement.Tiers[3].PriceMultiplier, s.Enforcement.Tiers[3].Shed = 9, 2700
	s.Enforcement.Tiers[2].Throttled = 24
	return s
}

// manyTenants is a snapshot with n tenants (and no "other").
func manyTenants(n int) api.Snapshot {
	s := incident()
	s.Tenants = make([]api.TenantRow, n)
	for i := range n {
		s.Tenants[i] = api.TenantRow{
			Tenant: fmt.Sprintf("tenant-%05d", i), Tier: tenant.Tier(i%4 + 1).String(),
			DBLoad: float64(n-i) / 100, RUPerSec: float64((i*7919)%n) + 0.5, ReqPerSec: float64(i % 97),
			P95Seconds: float64(i%13) / 100, ErrPerSec: float64(i%5) / 10, Share: 1 / float64(n), History: ramp(60, float64(i)),
		}
	}
	s.TenantsSeen = n
	return s
}

// rule is a valid throttle of tenantName.
func rule(tenantName string) policy.Rule {
	return policy.Rule{Tenant: tenantName, Action: policy.Throttle, RUPerSecond: 10, Expires: time.Now().Add(time.Minute), Reason: "test"}
}
