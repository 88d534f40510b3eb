package enforce

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

func serve(h http.Handler, method, tn, tier string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/items", nil)
	if tn != "" {
		r.Header.Set("X-Tenant", tn)
	}
	if tier != "" {
		r.Header.Set("X-Tier", tier)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMiddlewareChain(t *testing.T) {
	clk := &manualClock{}
	e := newTestEnforcer(t) // free: 10 RU/s, burst 10
	reg := prometheus.NewPedanticRegistry()
	met, err := NewMetrics(reg, e, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := NewMiddleware(e, WithHeaderTenant("X-Tenant", "X-Tier"), WithClock(clk.now), WithMetrics(met))
	if err != nil {
		t.Fatal(err)
	}
	var seen tenant.Tags
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = tenant.From(r.Context())
		clk.advance(100 * time.Millisecond) // 100 ms: 10 RU of latency
		w.Write(make([]byte, 8192))         // 1 RU of bytes
	}))
	// Missing and bad tenants: 400.
	if w := serve(h, "GET", "", ""); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "tenant is required") {
		t.Errorf("no tenant: %d %q", w.Code, w.Body.String())
	}
	if w := serve(h, "GET", "acme", "T9"); w.Code != http.StatusBadRequest {
		t.Errorf("bad tier: %d", w.Code)
	}
	// A POST costs 6 + 1 + 10 = 17 RU: the free bucket (10) goes to -7.
	if w := serve(h, "POST", "acme", "T1"); w.Code != 200 || seen.Tenant != "acme" || seen.Tier != tenant.T1 {
		t.Fatalf("first request: %d, tags %+v", w.Code, seen)
	}
	w := serve(h, "GET", "acme", "T1")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("in debt: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	clk.advance(time.Second) // +10 → 3 tokens
	if w := serve(h, "GET", "acme", "T1"); w.Code != 200 {
		t.Errorf("after refill: %d", w.Code)
	}
	// Shedding: T3 refused with 503, T0 served.
	e.Price().SetLevel(clk.now(), 4)
	w = serve(h, "GET", "other", "T3")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "5" {
		t.Errorf("T3 while shed: %d %q", w.Code, w.Header().Get("Retry-After"))
	}
	if w := serve(h, "GET", "support", "T0"); w.Code != 200 {
		t.Errorf("T0: %d", w.Code)
	}
	// The collector's policy, applied live: block a tenant.
	e.ApplyPolicyAt(clk.now(), policy.Policy{Version: 1, Rules: []policy.Rule{
		rule("b", "abuser", 0, policy.Throttle, 0, false, time.Hour)}})
	if w := serve(h, "GET", "abuser", "T1"); w.Code != http.StatusTooManyRequests {
		t.Errorf("blocked tenant: %d", w.Code)
	}
	st := e.Stats()
	if st.Tiers[1].Admitted != 2 || st.Tiers[1].Throttled != 2 || st.Tiers[3].Shed != 1 || st.Tiers[0].Admitted != 1 {
		t.Errorf("stats %+v", st.Tiers)
	}
	if problems, err := testutil.CollectAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	want := `
# HELP qtop_enforce_refused_total Work refused, by tier and reason (throttle: RU bucket or policy, shed: tier shed, queue: CoDel).
# TYPE qtop_enforce_refused_total counter
qtop_enforce_refused_total{reason="queue",tier="T0"} 0
qtop_enforce_refused_total{reason="queue",tier="T1"} 0
qtop_enforce_refused_total{reason="queue",tier="T2"} 0
qtop_enforce_refused_total{reason="queue",tier="T3"} 0
qtop_enforce_refused_total{reason="shed",tier="T0"} 0
qtop_enforce_refused_total{reason="shed",tier="T1"} 0
qtop_enforce_refused_total{reason="shed",tier="T2"} 0
qtop_enforce_refused_total{reason="shed",tier="T3"} 1
qtop_enforce_refused_total{reason="throttle",tier="T0"} 0
qtop_enforce_refused_total{reason="throttle",tier="T1"} 2
qtop_enforce_refused_total{reason="throttle",tier="T2"} 0
qtop_enforce_refused_total{reason="throttle",tier="T3"} 0
# HELP qtop_enforce_tier_shed 1 while a tier is being shed.
# TYPE qtop_enforce_tier_shed gauge
qtop_enforce_tier_shed{tier="T0"} 0
qtop_enforce_tier_shed{tier="T1"} 0
qtop_enforce_tier_shed{tier="T2"} 0
qtop_enforce_tier_shed{tier="T3"} 1
`
	if err := testutil.CollectAndCompare(met, strings.NewReader(want), "qtop_enforce_refused_total", "qtop_enforce_tier_shed"); err != nil {
		t.Error(err)
	}
	// Per-tenant series stay within N+1 = 3 whatever the tenants.
	for i := 0; i < 50; i++ {
		serve(h, "GET", "t"+string(rune('a'+i%26))+string(rune('a'+i/26)), "T1")
	}
	if n := testutil.CollectAndCount(reg, "qtop_enforce_tenant_requests_total"); n > 3 {
		t.Errorf("%d tenant series, at most 3", n)
	}
}

func TestMiddlewareShadow(t *testing.T) {
	e := newTestEnforcer(t, WithShadow(RuleShed, RuleBucket))
	mw, _ := NewMiddleware(e, WithHeaderTenant("X-Tenant", "X-Tier"))
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 1<<20)) }))
	e.Price().SetLevel(t0, e.Price().MaxLevel())
	for i := 0; i < 3; i++ {
		if w := serve(h, "GET", "acme", "T3"); w.Code != 200 {
			t.Fatalf("shadow mode refused: %d", w.Code)
		}
	}
	st := e.Stats().Tiers[3]
	if st.ShadowShed != 3 || st.ShadowThrottled != 2 || st.Shed != 0 || st.Throttled != 0 {
		t.Errorf("shadow stats %+v", st)
	}
}

func TestMiddlewareQueue(t *testing.T) {
	e := newTestEnforcer(t, WithPlans(map[string]Plan{PlanFree: {Limit: Limit{1e6, 1e6}, Weight: 1}}))
	q, err := e.NewQueue(1, WithCoDel(time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	mw, _ := NewMiddleware(e, WithHeaderTenant("X-Tenant", "X-Tier"), WithQueue(q))
	entered, release := make(chan struct{}), make(chan struct{})
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			close(entered)
			<-release
		}
	}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Tenant", "a")
		r.Header.Set("X-Hold", "1")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	<-entered
	w := serve(h, "GET", "b", "T2")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "queueing delay") {
		t.Errorf("queued past the wait limit: %d %q", w.Code, w.Body.String())
	}
	// A client that leaves gets no answer written.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	r.Header.Set("X-Tenant", "c")
	r.Header.Set("X-Tier", "T0")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Body.Len() != 0 {
		t.Errorf("answered a client that left: %q", rec.Body.String())
	}
	close(release)
	wg.Wait()
	if e.Stats().Tiers[2].Dropped != 1 {
		t.Errorf("drop not counted: %+v", e.Stats().Tiers[2])
	}
}

func TestMiddlewareContextTenantAndFlush(t *testing.T) {
	e := newTestEnforcer(t)
	if _, err := NewMiddleware(nil); err == nil {
		t.Error("nil enforcer accepted")
	}
	clk := &manualClock{}
	mw, _ := NewMiddleware(e, WithClock(clk.now))
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush through the wrapper: %v", err)
		}
	}))
	r := httptest.NewRequest("DELETE", "/", nil)
	r = r.WithContext(tenant.With(r.Context(), tenant.Tags{Tenant: "ctx-tenant", Tier: tenant.T2}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 || !w.Flushed {
		t.Errorf("%d flushed %v", w.Code, w.Flushed)
	}
	if got := e.Stats().Tiers[2].RU; got != 6 {
		t.Errorf("DELETE charged %v, want 6", got)
	}
	// Without tags in the context nor in baggage: 400.
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "no tenant") {
		t.Errorf("no tenant: %d %q", w.Code, w.Body.String())
	}
	if _, err := NewMetrics(nil, e, 1, 0); err == nil {
		t.Error("nil registerer accepted")
	}
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg, e, 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg, e, 1, 0); err == nil {
		t.Error("double registration accepted")
	}
}

func TestMiddlewareConcurrent(t *testing.T) {
	sig := &fixedSignal{}
	sig.set(0.6)
	e := newTestEnforcer(t, WithSignal(sig), WithEvalEvery(time.Millisecond))
	q, _ := e.NewQueue(4)
	reg := prometheus.NewRegistry()
	met, _ := NewMetrics(reg, e, 3, time.Millisecond)
	mw, _ := NewMiddleware(e, WithHeaderTenant("X-Tenant", "X-Tier"), WithQueue(q), WithMetrics(met))
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	var wg sync.WaitGroup
	var served [5]int64
	var mu sync.Mutex
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				tier := []string{"T0", "T1", "T2", "T3"}[(g+i)%4]
				w := serve(h, "GET", []string{"a", "b", "c", "d", "e"}[i%5], tier)
				switch w.Code {
				case 200, http.StatusTooManyRequests, http.StatusServiceUnavailable:
				default:
					t.Errorf("status %d", w.Code)
				}
				if g == 0 && i%50 == 0 {
					e.ApplyPolicyAt(time.Now(), policy.Policy{Version: uint64(i + 1), Rules: []policy.Rule{
						{ID: "x", Tenant: "e", Action: policy.Throttle, RUPerSecond: 1, Expires: time.Now().Add(time.Hour), Reason: "test"}}})
					_, _ = testutil.GatherAndCount(reg)
				}
				mu.Lock()
				served[(g+i)%4]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var decided uint64
	for _, s := range e.Stats().Tiers {
		decided += s.Admitted + s.Throttled + s.Shed + s.Dropped
	}
	if decided != 8*200 {
		t.Errorf("%d decisions counted for %d requests", decided, 8*200)
	}
	if q.InFlight() != 0 {
		t.Errorf("%d slots leaked", q.InFlight())
	}
}

// A tenant named like the "other" series has a series of its own, under
// its stand-in; "other" keeps only the tenants beyond the top N.
func TestMetricsTenantNamedOther(t *testing.T) {
	e := newTestEnforcer(t)
	reg := prometheus.NewRegistry()
	met, err := NewMetrics(reg, e, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	at := t0
	met.ObserveAt(at, tenant.Other, 1, false)
	met.ObserveAt(at, tenant.Other, 1, false)
	met.ObserveAt(at.Add(2*time.Second), "acme", 1, false) // reranks
	want := fmt.Sprintf(`
# HELP qtop_enforce_tenant_requests_total Requests per tenant, top N and other.
# TYPE qtop_enforce_tenant_requests_total counter
qtop_enforce_tenant_requests_total{tenant="acme"} 1
qtop_enforce_tenant_requests_total{tenant="other"} 0
qtop_enforce_tenant_requests_total{tenant=%q} 2
`, tenant.Escape(tenant.Other))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_enforce_tenant_requests_total"); err != nil {
		t.Error(err)
	}
}
