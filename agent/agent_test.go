package agent

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"

	"go.opentelemetry.io/otel/baggage"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/tenant"
)

func newAgent(t *testing.T, opts ...Option) *Agent {
	t.Helper()
	a, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	return a
}

func rows(a *Agent) map[string]report.Row {
	out := map[string]report.Row{}
	for _, r := range a.Recorder().Cut(time.Now()).Rows {
		out[r.Tenant+"|"+r.Route+"|"+r.Kind.String()] = r
	}
	return out
}

func serve(h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader("body"))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestHandlerRecordsOncePerRequest(t *testing.T) {
	// No latency term in the model, so that the RU are exact.
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "X-Tier")),
		WithCostModel(ru.Model{Base: ru.DefaultModel().Base, PerKiB: 0.125}))
	mux := http.NewServeMux()
	var seen tenant.Tags
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		seen, _ = tenant.From(r.Context())
		w.Write(make([]byte, 8192))
	})
	mux.HandleFunc("GET /boom", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	h := a.Handler(mux)
	for range 3 {
		if w := serve(h, "GET", "/items/7", "X-Tenant", "acme", "X-Tier", "T1"); w.Code != 200 {
			t.Fatalf("status %d", w.Code)
		}
	}
	serve(h, "GET", "/boom", "X-Tenant", "acme")
	if seen.Tenant != "acme" || seen.Tier != tenant.T1 {
		t.Errorf("handler saw %+v", seen)
	}
	got := rows(a)
	r := got["acme|GET /items/{id}|request"]
	// GET is a read: 1 RU + 8 KiB (+4 bytes of request body) at 1 RU per 8 KiB.
	if want := 3 + float64(3*(8192+4))/1024*0.125; r.Count != 3 || r.Errors != 0 || r.Tier != tenant.T1 || r.Bytes != 3*(8192+4) || math.Abs(r.RU-want) > 1e-9 {
		t.Errorf("row %+v", r)
	}
	if b := got["acme|GET /boom|request"]; b.Count != 1 || b.Errors != 1 || b.Tier != tenant.T2 {
		t.Errorf("5xx row %+v", b)
	}
	// The RU recorded is the RU charged: priced once.
	st := a.Enforcer().Stats()
	if charged := st.Tiers[1].RU + st.Tiers[2].RU; charged < r.RU || charged != r.RU+got["acme|GET /boom|request"].RU {
		t.Errorf("charged %v, recorded %v", charged, r.RU+got["acme|GET /boom|request"].RU)
	}
}

func TestHandlerRefusesAndCounts(t *testing.T) {
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "")), WithCostModel(ru.Model{Base: ru.DefaultModel().Base}),
		WithPlans(map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1, Burst: 1}, Weight: 1}}, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /w", func(w http.ResponseWriter, r *http.Request) {})
	h := a.Handler(mux)
	if w := serve(h, "POST", "/w", "X-Tenant", "acme"); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	w := serve(h, "POST", "/w", "X-Tenant", "acme")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second: %d %v", w.Code, w.Header())
	}
	if w := serve(h, "POST", "/w"); w.Code != http.StatusBadRequest {
		t.Errorf("no tenant: %d", w.Code)
	}
	if w := serve(h, "POST", "/w", "X-Tenant", "bad\x01tenant"); w.Code != http.StatusBadRequest {
		t.Errorf("invalid tenant: %d", w.Code)
	}
	got := rows(a)
	if r := got["acme|POST /w|request"]; r.Count != 2 || r.RU != 6 || r.Latency.Count() != 1 {
		t.Errorf("row %+v (want both requests, one charged 6 RU, one timed: a refusal is not latency)", r)
	}
	e := enforcementOf(a.Enforcer().Stats())
	if e.Admitted[2] != 1 || e.Throttled[2] != 1 {
		t.Errorf("enforcement %+v", e)
	}
}

func TestShadowLetsThrough(t *testing.T) {
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "")), WithShadow(),
		WithPlans(map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1, Burst: 1}, Weight: 1}}, nil))
	h := a.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		if w := serve(h, "POST", "/w", "X-Tenant", "acme"); w.Code != 200 {
			t.Fatalf("shadow refused: %d", w.Code)
		}
	}
	e := enforcementOf(a.Enforcer().Stats())
	if e.Throttled[2] != 0 || e.ShadowThrottled[2] != 2 || e.Admitted[2] != 3 {
		t.Errorf("enforcement %+v", e)
	}
}

func TestEnforcementOfKeepsDropsApart(t *testing.T) {
	var s enforce.Stats
	for i := range s.Tiers {
		b := uint64(10 * (i + 1))
		s.Tiers[i] = enforce.TierStats{Admitted: b + 1, Throttled: b + 2, Shed: b + 3, Dropped: b + 4,
			ShadowThrottled: b + 5, ShadowShed: b + 6, ShadowDropped: b + 7, Multiplier: float64(i + 1)}
	}
	e, d := enforcementOf(s), detailOf(s)
	for i := range s.Tiers {
		b := uint64(10 * (i + 1))
		want := [7]uint64{b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7}
		got := [7]uint64{e.Admitted[i], e.Throttled[i], e.Shed[i], d.Dropped[i], e.ShadowThrottled[i], e.ShadowShed[i], d.ShadowDropped[i]}
		if got != want || e.PriceMultiplier[i] != float64(i+1) {
			t.Errorf("tier %d: %v, want %v", i, got, want)
		}
	}
}

func TestCoDelDropsCount(t *testing.T) {
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "")), WithSlots(1))
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
	}))
	done := make(chan struct{})
	go func() { serve(h, "GET", "/slow", "X-Tenant", "acme"); close(done) }()
	<-entered
	// The one slot is taken: the next request waits past CoDel's limit
	// (100 ms with an empty queue) and is failed early.
	w := serve(h, "GET", "/fast", "X-Tenant", "acme", "X-Tier", "T3")
	close(release)
	<-done
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503 from CoDel", w.Code)
	}
	e, d := enforcementOf(a.Enforcer().Stats()), detailOf(a.Enforcer().Stats())
	if d.Dropped[2] != 1 || e.Shed[2] != 0 {
		t.Errorf("dropped %v shed %v: a CoDel drop is not shedding", d.Dropped, e.Shed)
	}
}

func TestExtractors(t *testing.T) {
	key := []byte("k3y")
	now := time.Now().Unix()
	tok := func(alg, payload string, key []byte) string {
		enc := base64.RawURLEncoding
		s := enc.EncodeToString([]byte(`{"alg":"`+alg+`","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return "Bearer " + s + "." + enc.EncodeToString(m.Sum(nil))
	}
	jwt := FromJWT(key, "org", "tier")
	for _, c := range []struct {
		name, auth string
		want       string
		err        error
	}{
		{"valid", tok("HS256", fmt.Sprintf(`{"org":"acme","tier":"T1","exp":%d}`, now+60), key), "acme", nil},
		{"expired", tok("HS256", fmt.Sprintf(`{"org":"acme","exp":%d}`, now-1), key), "", ErrUnauthorized},
		{"not yet", tok("HS256", fmt.Sprintf(`{"org":"acme","nbf":%d}`, now+60), key), "", ErrUnauthorized},
		{"exp not a number", tok("HS256", `{"org":"acme","exp":"tomorrow"}`, key), "", ErrUnauthorized},
		{"other key", tok("HS256", `{"org":"acme"}`, []byte("other")), "", ErrUnauthorized},
		{"alg none", tok("none", `{"org":"acme"}`, key), "", ErrUnauthorized},
		{"RS256 refused", tok("RS256", `{"org":"acme"}`, key), "", ErrUnauthorized},
		{"no claim", tok("HS256", `{"sub":"x"}`, key), "", ErrUnauthorized},
		{"no token", "", "", ErrUnauthorized},
		{"garbage", "Bearer a.b", "", ErrUnauthorized},
		{"huge", "Bearer " + strings.Repeat("a", MaxTokenBytes+1), "", ErrUnauthorized},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", c.auth)
		got, err := jwt(r)
		if !errors.Is(err, c.err) || (c.err == nil && (got.Tenant != c.want || got.Tier != tenant.T1)) {
			t.Errorf("%s: %+v, %v", c.name, got, err)
		}
	}
	r := httptest.NewRequest("GET", "/acme/orders/7", nil)
	if got, err := FromPathSegment(0)(r); err != nil || got.Tenant != "acme" {
		t.Errorf("segment 0: %+v %v", got, err)
	}
	if got, err := FromPathSegment(1)(r); err != nil || got.Tenant != "orders" {
		t.Errorf("segment 1: %+v %v", got, err)
	}
	if _, err := FromPathSegment(5)(r); !errors.Is(err, ErrNoTenant) {
		t.Errorf("segment 5: %v", err)
	}
	r.Header.Set("Baggage", "other=1,tenant.id=globex,tenant.tier=T3")
	if got, err := FirstOf(FromHeader("X-Tenant", ""), FromBaggage())(r); err != nil || got.Tenant != "globex" || got.Tier != tenant.T3 {
		t.Errorf("baggage: %+v %v", got, err)
	}
	r.Header.Set("X-Tier", "T9")
	r.Header.Set("X-Tenant", "acme")
	if _, err := FromHeader("X-Tenant", "X-Tier")(r); err == nil {
		t.Error("bad tier accepted")
	}
}

func TestBadJWTAnswers401(t *testing.T) {
	a := newAgent(t, WithTenant(FromJWT([]byte("k"), "org", "")))
	h := a.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler ran") }))
	w := serve(h, "GET", "/", "Authorization", "Bearer x.y.z")
	if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
		t.Errorf("status %d, WWW-Authenticate %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
}

// TestTransportCarriesTenant: a service calls another through the
// agent's Transport; the downstream agent, reading baggage, attributes
// the call to the same tenant.
func TestTransportCarriesTenant(t *testing.T) {
	down := newAgent(t, WithService("down"), WithTenant(FromBaggage()))
	var header string
	ds := httptest.NewServer(down.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get("Baggage")
	})))
	defer ds.Close()
	up := newAgent(t, WithService("up"), WithTenant(FromHeader("X-Tenant", "X-Tier")))
	client := &http.Client{Transport: up.Transport(nil)}
	defer client.CloseIdleConnections()
	h := up.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Baggage an OTel propagator already put in the context stays.
		m, _ := baggage.NewMemberRaw("k", "v")
		bg, _ := baggage.New(m)
		req, _ := http.NewRequestWithContext(baggage.ContextWithBaggage(r.Context(), bg), "GET", ds.URL+"/x", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}))
	serve(h, "GET", "/", "X-Tenant", "acme", "X-Tier", "T1")
	got := rows(down)
	if r := got["acme||request"]; r.Count != 1 || r.Tier != tenant.T1 {
		t.Errorf("downstream rows %v (baggage header %q)", got, header)
	}
	if !strings.Contains(header, "k=v") {
		t.Errorf("existing baggage lost: %q", header)
	}
}

// TestTransportKeepsRefusedBaggage: a baggage header OpenTelemetry's
// parser refuses (here 70 members, one a stale tenant.id) still carries
// the tenant downstream, first, with the other members kept and the
// stale tenant gone.
func TestTransportKeepsRefusedBaggage(t *testing.T) {
	var got []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Values("Baggage")
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	up := newAgent(t, WithService("up"))
	client := &http.Client{Transport: up.Transport(base)}
	var members []string
	for i := range 69 {
		members = append(members, fmt.Sprintf("k%d=v%d", i, i))
	}
	members = append(members[:30], append([]string{"tenant.id=stale;p=1", " tenant.tier = T3"}, members[30:]...)...)
	for _, h := range [][]string{{strings.Join(members, ",")}, {strings.Join(members[:10], ","), strings.Join(members[10:], ",")},
		{"k=v,bad member,tenant.id=stale"}} {
		if _, err := baggage.Parse(strings.Join(h, ",")); err == nil {
			t.Fatal("the header is one OpenTelemetry takes")
		}
		req, _ := http.NewRequestWithContext(tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Tier: tenant.T1}), "GET", "http://down/x", nil)
		for _, v := range h {
			req.Header.Add("Baggage", v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(got) != 1 {
			t.Fatalf("baggage sent as %d headers", len(got))
		}
		tags, err := tenant.FromBaggageHeader(got)
		if err != nil || tags.Tenant != "acme" || tags.Tier != tenant.T1 {
			t.Fatalf("downstream reads %+v, %v from %q", tags, err, got[0])
		}
		first := strings.SplitN(got[0], ",", 3)
		if len(first) < 3 || !slices.Contains(first[:2], "tenant.id=acme") || !slices.Contains(first[:2], "tenant.tier=T1") ||
			strings.Contains(got[0], "stale") || strings.Contains(got[0], "T3") {
			t.Errorf("baggage sent: %q", got[0])
		}
		for _, v := range h {
			for m := range strings.SplitSeq(v, ",") {
				if !strings.Contains(m, "tenant.") && !strings.Contains(got[0], m) {
					t.Errorf("member %q lost: %q", m, got[0])
				}
			}
		}
		if req.Header.Values("Baggage")[0] != h[0] {
			t.Error("the caller's request was changed")
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRouteNamedOther: a route really named like the overflow route is
// recorded under its stand-in (tenant.EscapeValue), a row of its own,
// never in the routes beyond the tenant's limit; the handler sees the
// route as given.
func TestRouteNamedOther(t *testing.T) {
	a := newAgent(t, WithTenant(func(*http.Request) (tenant.Tags, error) {
		return tenant.Tags{Tenant: "acme", Route: report.OtherRoute}, nil
	}))
	var seen tenant.Tags
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen, _ = tenant.From(r.Context()) }))
	for range 3 {
		serve(h, "GET", "/x")
	}
	if err := a.Job(context.Background(), tenant.Tags{Tenant: "acme", Route: report.OtherRoute}, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	got := rows(a)
	own := tenant.EscapeValue(report.OtherRoute)
	if len(got) != 2 || got["acme|"+own+"|request"].Count != 3 || got["acme|"+own+"|job"].Count != 1 {
		var ks []string
		for k := range got {
			ks = append(ks, k)
		}
		t.Errorf("rows %v, want %s's 3 requests and 1 job, none in the overflow route", ks, own)
	}
	if seen.Route != report.OtherRoute {
		t.Errorf("the handler saw route %q", seen.Route)
	}
}

func TestJobAndWorkers(t *testing.T) {
	a := newAgent(t, WithPlans(map[string]enforce.Plan{
		enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1e6, Burst: 1e6}, Weight: 1, Concurrency: 1},
		enforce.PlanPro:  {Limit: enforce.Limit{RUPerSecond: 1e6, Burst: 1e6}, Weight: 4, Concurrency: 4},
	}, func(t string) string {
		if t == "big" {
			return enforce.PlanPro
		}
		return enforce.PlanFree
	}))
	ctx := context.Background()
	if err := a.Job(ctx, tenant.Tags{Tenant: "acme", Route: "nightly"}, func(ctx context.Context) error {
		if tg, _ := tenant.From(ctx); tg.Tenant != "acme" {
			return fmt.Errorf("job context has %+v", tg)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.Job(ctx, tenant.Tags{Tenant: ""}, func(context.Context) error { return nil }); err == nil {
		t.Error("job without a tenant ran")
	}
	var mu sync.Mutex
	var order []string
	var inflight, maxSmall atomic.Int64
	w, err := NewWorkers(a, 4, func(ctx context.Context, v string) error {
		tg, _ := tenant.From(ctx)
		if tg.Tenant == "small" {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			if n > maxSmall.Load() {
				maxSmall.Store(n)
			}
		}
		mu.Lock()
		order = append(order, tg.Tenant)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := w.Submit(ctx, tenant.Tags{Tenant: "big", Route: "import"}, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		_ = w.Submit(ctx, tenant.Tags{Tenant: "small", Route: "import"}, fmt.Sprint(i))
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Submit(ctx, tenant.Tags{Tenant: "small"}, "late"); !errors.Is(err, ErrClosed) {
		t.Errorf("submit after shutdown: %v", err)
	}
	if len(order) != 45 || maxSmall.Load() > 1 {
		t.Errorf("%d jobs run, small ran %d at once (cap 1)", len(order), maxSmall.Load())
	}
	got := rows(a)
	if r := got["big|import|job"]; r.Count != 40 || r.RU <= 0 {
		t.Errorf("big jobs %+v", r)
	}
	if r := got["acme|nightly|job"]; r.Count != 1 {
		t.Errorf("job row %+v", r)
	}
}

func TestTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "")), WithTracerProvider(tp), WithBaggage())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /x", func(w http.ResponseWriter, r *http.Request) {
		if m := baggage.FromContext(r.Context()).Member(tenant.BaggageTenant); m.Value() != "acme" {
			t.Errorf("baggage member %q", m.Value())
		}
	})
	serve(a.Handler(mux), "GET", "/x", "X-Tenant", "acme")
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "GET GET /x" && spans[0].Name != "GET /x" {
		t.Fatalf("spans %v", spans)
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["tenant.id"] != "acme" || attrs["http.route"] != "GET /x" || attrs["qtop.ru"] == "" {
		t.Errorf("attributes %v", attrs)
	}
	// The span processor does not record the server span a second time.
	if r := rows(a)["acme|GET /x|request"]; r.Count != 1 {
		t.Errorf("request recorded %d times", r.Count)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, o := range []Option{WithCollector("collector:7070", ""), WithSlots(-1), WithInterval(0)} {
		if _, err := New(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%v", err)
		}
	}
	if _, err := NewWorkers[int](nil, 1, nil); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
}

func TestPoolWaitsBounded(t *testing.T) {
	p := poolWaits{max: 3}
	for i := range 10 {
		p.add(fmt.Sprint("t", i), time.Duration(i)*time.Millisecond)
	}
	p.add("t0", time.Second)
	got := p.take()
	if len(got) != 3 || got[0].Tenant != "t0" || got[0].Count != 2 || got[0].Max != time.Second {
		t.Errorf("waits %+v", got)
	}
	if got := p.take(); got != nil {
		t.Errorf("second take %+v", got)
	}
}

// A tenant named like the overflow entry waits under its stand-in, apart
// from the tenants beyond the limit.
func TestPoolWaitsTenantNamedOther(t *testing.T) {
	p := poolWaits{max: 2}
	p.add(report.OtherTenant, time.Second)
	p.add("a", time.Millisecond)
	p.add("b", time.Millisecond)
	got := map[string]uint64{}
	for _, w := range p.take() {
		got[w.Tenant] = w.Count
	}
	want := map[string]uint64{tenant.Escape(report.OtherTenant): 1, report.OtherTenant: 2}
	if !maps.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// The reporter's cut hook copies one window of the enforcer's counters
// per call.
func TestEnforcementCut(t *testing.T) {
	e, err := enforce.New()
	if err != nil {
		t.Fatal(err)
	}
	cut := enforcementCut(e, func() []report.PoolWait { return nil })
	src := func() report.Enforcement {
		var r report.Report
		cut(&r)
		return r.Enforcement
	}
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	e.ApplyPolicyAt(t0, policy.Policy{Version: 1, Rules: []policy.Rule{{ID: "r", Tenant: "noisy", Action: policy.Throttle,
		RUPerSecond: 0, Expires: t0.Add(time.Hour), Reason: "test"}}})
	for i := range 3 {
		e.AllowAt(t0.Add(time.Duration(i)*time.Millisecond), tenant.Tags{Tenant: "noisy", Tier: tenant.T2})
	}
	e.AllowAt(t0, tenant.Tags{Tenant: "small", Tier: tenant.T1})
	got := src()
	if got.Throttled[2] != 3 || got.Admitted[1] != 1 || got.Admitted[2] != 0 || got.PriceMultiplier[3] != 1 {
		t.Errorf("first window %+v", got)
	}
	if got := src(); got.Throttled[2] != 0 || got.Admitted[1] != 0 {
		t.Errorf("second window %+v, want no new counts", got)
	}
}

// TestBoundedInputs: what a client sends is bounded before it is parsed.
func TestBoundedInputs(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Baggage", strings.Repeat("k=v,", 4000)+"tenant.id=acme")
	if got, err := FromBaggage()(r); !errors.Is(err, ErrNoTenant) {
		t.Errorf("a tenant.id past 16 KB of baggage: %+v, %v; want it unread", got, err)
	}
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "")))
	h := a.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler ran") }))
	if w := serve(h, "GET", "/", "X-Tenant", strings.Repeat("a", tenant.MaxTenantLen+1)); w.Code != http.StatusBadRequest {
		t.Errorf("long tenant: %d", w.Code)
	}
}

// TestFromBaggageTolerant: a baggage header that OpenTelemetry's parser
// refuses as a whole (more than 64 members, a malformed member) still
// gives its tenant.id: the request is served and recorded for it, not
// answered 400. A malformed tenant.id member is still a 400.
func TestFromBaggageTolerant(t *testing.T) {
	a := newAgent(t, WithTenant(FromBaggage()))
	h := a.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var many strings.Builder
	for i := range 70 {
		fmt.Fprintf(&many, "k%d=v,", i)
	}
	for _, c := range []struct {
		name, header string
		code         int
	}{
		{"71 members", many.String() + "tenant.id=acme,tenant.tier=T1", http.StatusOK},
		{"a malformed member", "tenant.id=acme,bad member,x=y", http.StatusOK},
		{"a malformed tenant.id", "tenant.id=ac me", http.StatusBadRequest},
	} {
		if w := serve(h, "GET", "/", "Baggage", c.header); w.Code != c.code {
			t.Errorf("%s: %d %q, want %d", c.name, w.Code, w.Body.String(), c.code)
		}
	}
	if got := rows(a); got["acme||request"].Count != 2 {
		t.Errorf("rows %v, want 2 requests of acme", got)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Baggage", many.String()+"tenant.id=acme,tenant.tier=T1")
	if got, err := FromBaggage()(r); err != nil || got != (tenant.Tags{Tenant: "acme", Tier: tenant.T1}) {
		t.Errorf("71 members: %+v, %v", got, err)
	}
}
