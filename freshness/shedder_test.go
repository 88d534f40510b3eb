package freshness

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// freshFixture is a balance handler behind the freshness middleware, on
// a clock the test moves.
type freshFixture struct {
	t        *testing.T
	f        *Shedder
	h        http.Handler
	now      time.Time
	over     bool
	calls    atomic.Int64
	balance  atomic.Int64
	reg      *prometheus.Registry
	bodySize int
}

func newFreshFixture(t *testing.T, rules policy.Freshness, opts ...Option) *freshFixture {
	t.Helper()
	x := &freshFixture{t: t, now: time.Unix(1_700_000_000, 0), reg: prometheus.NewRegistry()}
	x.balance.Store(100)
	opts = append([]Option{WithRules(rules), WithClock(func() time.Time { return x.now }),
		WithOverload(func() bool { return x.over }), WithOverloadClock(func() time.Time { return x.now }),
		WithOverloadHold(0), WithRegisterer(x.reg),
		WithRouteFunc(func(*http.Request) string { return "/balance" })}, opts...)
	f, err := New(testSigner(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	x.f = f
	x.h = f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"balance":%d}`, x.balance.Load())
		if x.bodySize > 0 {
			w.Write([]byte(strings.Repeat(" ", x.bodySize)))
		}
	}))
	return x
}

// get sends a GET with the given ETag, cause and app age ("" for none).
func (x *freshFixture) get(etag, cause, appAge string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/balance?account=1", nil)
	if etag != "" {
		r.Header.Set("If-None-Match", etag)
	}
	if cause != "" {
		r.Header.Set(HeaderCause, cause)
	}
	if appAge != "" {
		r.Header.Set(HeaderAppAge, appAge)
	}
	w := httptest.NewRecorder()
	x.h.ServeHTTP(w, r)
	return w
}

func monzo(batch int) policy.Freshness {
	return policy.Freshness{Rules: policy.MonzoRules(), Batch: batch}
}

func TestFreshnessETagAndRevalidation(t *testing.T) {
	x := newFreshFixture(t, policy.Freshness{})
	w := x.get("", "", "")
	etag := w.Header().Get("ETag")
	if w.Code != 200 || etag == "" || w.Body.String() != `{"balance":100}` {
		t.Fatalf("first GET: %d, etag %q, body %q", w.Code, etag, w.Body)
	}
	h, at, err := x.f.signer.Verify("/balance?account=1", etag)
	if err != nil || h != ResponseHash([]byte(`{"balance":100}`)) || !at.Equal(x.now) {
		t.Fatalf("etag %s: hash %x, at %v, %v", etag, h, at, err)
	}
	// Same data later: the handler runs, the answer is 304 with a new
	// computed-at.
	x.now = x.now.Add(time.Minute)
	w = x.get(etag, "", "")
	if w.Code != http.StatusNotModified || w.Body.Len() != 0 || x.calls.Load() != 2 {
		t.Fatalf("revalidation: %d, body %q, %d calls", w.Code, w.Body, x.calls.Load())
	}
	if _, at2, _ := x.f.signer.Verify("/balance?account=1", w.Header().Get("ETag")); !at2.Equal(x.now) {
		t.Errorf("revalidated etag computed at %v, want %v", at2, x.now)
	}
	// Changed data: a full 200.
	x.balance.Store(50)
	if w = x.get(etag, "", ""); w.Code != 200 || w.Body.String() != `{"balance":50}` {
		t.Fatalf("changed data: %d %q", w.Code, w.Body)
	}
}

func TestFreshnessShedsOnlyUnderOverload(t *testing.T) {
	x := newFreshFixture(t, monzo(3))
	etag := x.get("", "", "").Header().Get("ETag")
	x.balance.Store(7) // the client's copy is stale now
	x.now = x.now.Add(time.Hour)

	steps := []struct {
		name         string
		over         bool
		etag, cause  string
		appAge       string
		wantCode     int
		wantRule     string
		wantHandlerN int64 // handler calls added
	}{
		{"no overload: push runs the handler", false, etag, "push-notification", "", 200, "", 1},
		{"overload: push within 24 h is shed", true, etag, "push-notification", "", 304, "push-24h", 0},
		{"cause is case-insensitive", true, etag, " PUSH-Notification ", "", 304, "push-24h", 0},
		{"unknown cause is interactive", true, etag, "push", "", 200, "", 1},
		{"missing cause is interactive", true, etag, "", "", 200, "", 1},
		{"interactive is never shed", true, etag, "interactive", "", 200, "", 1},
		{"no etag: nothing to answer 304 with", true, "", "push-notification", "", 200, "", 1},
		{"garbage etag", true, `"q1.garbage"`, "push-notification", "", 200, "", 1},
		{"app-open within 1 h", true, etag, "app-open", "", 304, "app-open-1h", 0},
		{"reload in the first 10 s", true, etag, "generic-reload", "9.5", 304, "reload-10s", 0},
		{"reload after 10 s", true, etag, "generic-reload", "11", 200, "", 1},
		{"reload without app age", true, etag, "generic-reload", "", 200, "", 1},
		{"reload with a bad app age", true, etag, "generic-reload", "-1", 200, "", 1},
	}
	for _, st := range steps {
		x.over = st.over
		before := x.calls.Load()
		w := x.get(st.etag, st.cause, st.appAge)
		if w.Code != st.wantCode || w.Header().Get(HeaderShedRule) != st.wantRule || x.calls.Load()-before != st.wantHandlerN {
			t.Errorf("%s: %d rule %q, %d handler calls; want %d %q %d", st.name, w.Code, w.Header().Get(HeaderShedRule),
				x.calls.Load()-before, st.wantCode, st.wantRule, st.wantHandlerN)
		}
		if st.wantRule != "" && w.Header().Get("ETag") != st.etag {
			t.Errorf("%s: shed 304 carries etag %q, want the client's %q", st.name, w.Header().Get("ETag"), st.etag)
		}
	}

	// Past the bound: app-open after 1 h, push after 24 h.
	x.over = true
	x.now = x.now.Add(30 * time.Minute)
	if w := x.get(etag, "app-open", ""); w.Code != 200 {
		t.Errorf("app-open of a 90-minute-old copy: %d", w.Code)
	}
	x.now = x.now.Add(23 * time.Hour)
	if w := x.get(etag, "push-notification", ""); w.Code != 200 {
		t.Errorf("push of a 24.5-hour-old copy: %d", w.Code)
	}
}

func TestFreshnessForgedETagNotShed(t *testing.T) {
	x := newFreshFixture(t, monzo(3))
	x.over = true
	old := x.get("", "", "").Header().Get("ETag")
	x.now = x.now.Add(48 * time.Hour)
	// The client rewrites computed-at to look fresh: the tag breaks.
	parts := strings.Split(strings.Trim(old, `"`), ".")
	parts[2] = fmt.Sprint(x.now.Unix())
	forged := `"` + strings.Join(parts, ".") + `"`
	before := x.calls.Load()
	if w := x.get(forged, "push-notification", ""); w.Code != 200 || x.calls.Load() != before+1 {
		t.Fatalf("forged etag: %d", w.Code)
	}
	// The honest 48-hour-old etag is past the push bound: the handler
	// runs (and, the balance being the same, revalidates it).
	before = x.calls.Load()
	if w := x.get(old, "push-notification", ""); w.Header().Get(HeaderShedRule) != "" || x.calls.Load() != before+1 {
		t.Fatalf("48 h old etag shed: %d", w.Code)
	}
}

func TestFreshnessBatches(t *testing.T) {
	x := newFreshFixture(t, monzo(0))
	x.over = true
	etag := x.get("", "", "").Header().Get("ETag")
	x.balance.Store(1) // so that an unshed request answers 200
	causes := []struct{ cause, appAge string }{{"push-notification", ""}, {"app-open", ""}, {"generic-reload", "1"}}
	for batch := 0; batch <= 3; batch++ {
		x.f.ApplyPolicy(policy.Policy{Version: uint64(batch + 1), Freshness: &policy.Freshness{Rules: policy.MonzoRules(), Batch: batch}})
		for i, c := range causes {
			want := 200
			if i < batch {
				want = 304
			}
			if w := x.get(etag, c.cause, c.appAge); w.Code != want {
				t.Errorf("batch %d, %s: %d, want %d", batch, c.cause, w.Code, want)
			}
		}
	}
	// A policy without a freshness part puts back the local rules (none armed).
	x.f.ApplyPolicy(policy.Policy{Version: 9})
	if w := x.get(etag, "push-notification", ""); w.Code != 200 {
		t.Errorf("after the collector dropped its freshness policy: %d", w.Code)
	}
	// An invalid one is ignored.
	x.f.ApplyPolicy(policy.Policy{Version: 10, Freshness: &policy.Freshness{Rules: policy.MonzoRules(), Batch: 7}})
	if got := x.f.Policy(); got.Batch != 0 {
		t.Errorf("invalid policy installed: %+v", got)
	}
}

func TestFreshnessOverloadHold(t *testing.T) {
	x := newFreshFixture(t, monzo(1), WithOverloadHold(10*time.Second))
	etag := x.get("", "", "").Header().Get("ETag")
	x.balance.Store(3)
	t0 := x.now
	for _, st := range []struct {
		at   time.Duration
		over bool
		shed bool
	}{
		{0, false, false},
		{time.Second, true, true},
		{5 * time.Second, false, true}, // within the hold
		{11 * time.Second, false, false},
		{12 * time.Second, true, true},
		{-time.Hour, false, false}, // the clock went back: no hold
	} {
		x.now, x.over = t0.Add(st.at), st.over
		w := x.get(etag, "push-notification", "")
		if got := w.Header().Get(HeaderShedRule) != ""; got != st.shed {
			t.Errorf("t0%+v overloaded %v: shed %v, want %v", st.at, st.over, got, st.shed)
		}
	}
	if _, err := New(testSigner(t), WithOverloadHold(-1)); err == nil {
		t.Error("negative hold accepted")
	}
}

func TestFreshnessForced(t *testing.T) {
	x := newFreshFixture(t, policy.Freshness{})
	etag := x.get("", "", "").Header().Get("ETag")
	fp := monzo(1)
	fp.Force, fp.ForceUntil = true, x.now.Add(10*time.Minute)
	x.f.ApplyPolicy(policy.Policy{Version: 1, Freshness: &fp})
	if w := x.get(etag, "push-notification", ""); w.Code != 304 {
		t.Fatalf("forced batch without overload: %d", w.Code)
	}
	x.now = x.now.Add(11 * time.Minute)
	if w := x.get(etag, "push-notification", ""); w.Code == 304 && w.Header().Get(HeaderShedRule) != "" {
		t.Fatalf("force outlived force_until")
	}
}

func TestFreshnessShadowPrecision(t *testing.T) {
	rules := monzo(1)
	rules.Rules[0].Shadow = true
	x := newFreshFixture(t, rules)
	x.over = true
	etag := x.get("", "", "").Header().Get("ETag")
	// 8 pushes: the data changed before 2 of them.
	for i := range 8 {
		if i == 3 || i == 6 {
			x.balance.Add(1)
		}
		before := x.calls.Load()
		w := x.get(etag, "push-notification", "")
		if x.calls.Load() != before+1 || w.Header().Get(HeaderShedRule) != "" {
			t.Fatalf("shadow rule did not run the handler (%d)", w.Code)
		}
		etag = w.Header().Get("ETag") // the client keeps what it got
	}
	win := x.f.Drain()
	var got RuleCount
	for _, r := range win.Rules {
		if r.Rule == "push-24h" {
			got = r
		}
	}
	if got.Matched != 8 || got.Served != 0 || got.Right != 6 || got.Wrong != 2 {
		t.Fatalf("shadow counts %+v, want 8 matched, 6 right, 2 wrong", got)
	}
	want := `
# HELP qtop_freshness_precision_ratio Share of a shadow rule's would-be 304s that were right, by rule and route.
# TYPE qtop_freshness_precision_ratio gauge
qtop_freshness_precision_ratio{route="/balance",rule="push-24h"} 0.75
`
	if err := testutil.CollectAndCompare(x.reg, strings.NewReader(want), "qtop_freshness_precision_ratio"); err != nil {
		t.Error(err)
	}
	if probs, err := testutil.CollectAndLint(x.reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", probs, err)
	}
	if again := x.f.Drain(); len(again.Rules) != 0 || len(again.Routes) != 0 {
		t.Errorf("second drain not empty: %+v", again)
	}
}

func TestFreshnessSampling(t *testing.T) {
	x := newFreshFixture(t, policy.Freshness{}, WithSampling(1),
		WithCallerFunc(func(r *http.Request) string { return r.Header.Get("Authorization") }))
	send := func(user string) {
		r := httptest.NewRequest(http.MethodGet, "/balance?account=1", nil)
		r.Header.Set("Authorization", user)
		x.h.ServeHTTP(httptest.NewRecorder(), r)
	}
	send("alice-token")
	send("alice-token")
	send("bob-token")
	send("")
	w := x.f.Drain()
	if len(w.Samples) != 3 {
		t.Fatalf("%d samples, want 3 (the caller-less request is not sampled)", len(w.Samples))
	}
	a, b := w.Samples[0], w.Samples[2]
	if a.Caller != w.Samples[1].Caller || a.Caller == b.Caller || a.Response != ResponseHash([]byte(`{"balance":100}`)) || a.Route != "/balance" {
		t.Errorf("samples %+v", w.Samples)
	}
	if len(x.f.Drain().Samples) != 0 {
		t.Error("drain kept the samples")
	}

	// 1 in 4 callers: about a quarter of 400 callers, each followed on every request.
	y := newFreshFixture(t, policy.Freshness{}, WithSampling(4), WithMaxSamples(10_000),
		WithCallerFunc(func(r *http.Request) string { return r.Header.Get("Authorization") }))
	for u := range 400 {
		for range 3 {
			r := httptest.NewRequest(http.MethodGet, "/balance", nil)
			r.Header.Set("Authorization", fmt.Sprint("user-", u))
			y.h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	per := map[uint64]int{}
	for _, s := range y.f.Drain().Samples {
		per[s.Caller]++
	}
	if len(per) < 60 || len(per) > 140 {
		t.Errorf("%d of 400 callers sampled, want about 100", len(per))
	}
	for c, n := range per {
		if n != 3 {
			t.Errorf("caller %x sampled %d times of 3", c, n)
		}
	}

	// The buffer bound drops and counts.
	z := newFreshFixture(t, policy.Freshness{}, WithSampling(1), WithMaxSamples(2),
		WithCallerFunc(func(*http.Request) string { return "u" }))
	for range 5 {
		z.get("", "", "")
	}
	if w := z.f.Drain(); len(w.Samples) != 2 || w.SamplesDropped != 3 {
		t.Errorf("bounded samples: %d kept, %d dropped", len(w.Samples), w.SamplesDropped)
	}
}

func TestFreshnessPassThrough(t *testing.T) {
	x := newFreshFixture(t, monzo(3), WithMaxBody(64))
	x.over = true
	// A POST is never judged.
	r := httptest.NewRequest(http.MethodPost, "/balance", nil)
	w := httptest.NewRecorder()
	x.h.ServeHTTP(w, r)
	if w.Header().Get("ETag") != "" || w.Code != 200 {
		t.Errorf("POST: %d etag %q", w.Code, w.Header().Get("ETag"))
	}
	// A body beyond the bound streams through without an ETag.
	x.bodySize = 1000
	w = x.get("", "", "")
	if w.Header().Get("ETag") != "" || w.Body.Len() != len(`{"balance":100}`)+1000 {
		t.Errorf("large body: etag %q, %d bytes", w.Header().Get("ETag"), w.Body.Len())
	}
	// A handler's own ETag is kept.
	f, _ := New(testSigner(t))
	h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"mine"`)
		w.Write([]byte("x"))
	}))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Header().Get("ETag") != `"mine"` || w.Body.String() != "x" {
		t.Errorf("own etag: %q %q", w.Header().Get("ETag"), w.Body)
	}
	// A non-200 goes through untouched.
	h = f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 404) }))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != 404 || w.Header().Get("ETag") != "" {
		t.Errorf("404: %d %q", w.Code, w.Header().Get("ETag"))
	}
}

func TestFreshnessConfig(t *testing.T) {
	s := testSigner(t)
	for _, o := range []Option{
		WithRoutes(0), WithRoutes(MaxFreshRoutes + 1), WithMaxSamples(-1), WithMaxBody(-1),
		WithCauseHeader(""), WithClock(nil),
		WithRules(policy.Freshness{Rules: []policy.FreshnessRule{{ID: "x", Cause: policy.CauseInteractive, MaxAgeSeconds: 1}}, Batch: 1}),
	} {
		if _, err := New(s, o); err == nil {
			t.Error("bad option accepted")
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("nil signer accepted")
	}
}

func TestFreshnessRouteBound(t *testing.T) {
	n := 0
	f, err := New(testSigner(t), WithRoutes(2), WithRouteFunc(func(*http.Request) string { n++; return fmt.Sprint("/r", n) }))
	if err != nil {
		t.Fatal(err)
	}
	h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 5 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	got := map[string]uint64{}
	for _, r := range f.Drain().Routes {
		got[r.Route] = r.Requests
	}
	if len(got) != 3 || got["/r1"] != 1 || got["/r2"] != 1 || got[OtherRouteName] != 3 {
		t.Errorf("routes %v", got)
	}
}

// TestFreshnessRouteNamedOther: a route really named "other", or one
// that is not a valid tag value, is counted under its stand-in
// (tenant.SubstituteRoute), as the meter's rows name it, not with the
// requests that have no route or are beyond the bound; a rule for route
// "other" is that route's.
func TestFreshnessRouteNamedOther(t *testing.T) {
	f, err := New(testSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		h.ServeHTTP(httptest.NewRecorder(), r.WithContext(tenant.With(r.Context(), tenant.Tags{Tenant: "acme", Route: OtherRouteName})))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil)) // no route
	// A route too long to be a tag value: its own stand-in, as the meter
	// names it (tenant.SubstituteRoute), not in "other" nor under its text.
	long := strings.Repeat("r", tenant.MaxRouteLen+1)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	h.ServeHTTP(httptest.NewRecorder(), r.WithContext(tenant.With(r.Context(), tenant.Tags{Tenant: "acme", Route: long})))
	got := map[string]uint64{}
	for _, r := range f.Drain().Routes {
		got[r.Route] = r.Requests
	}
	longName, _ := tenant.SubstituteRoute(long)
	if own := tenant.EscapeValue(OtherRouteName); len(got) != 3 || got[own] != 3 || got[OtherRouteName] != 1 || got[longName] != 1 {
		t.Errorf("routes %v, want %s: 3, %s: 1 and %s: 1", got, own, OtherRouteName, longName)
	}
}

func BenchmarkFreshnessGET(b *testing.B) {
	f, _ := New(testSigner(b), WithRules(monzo(3)), WithOverload(func() bool { return true }),
		WithSampling(1000))
	body := []byte(`{"account":"1234","balance":{"currency":"GBP","minor":102345}}`)
	h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	r := httptest.NewRequest(http.MethodGet, "/accounts/1234/balance", nil)
	w := httptest.NewRecorder()
	etag := func() string { h.ServeHTTP(w, r); return w.Header().Get("ETag") }()
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w := nopWriter{h: http.Header{}}
			h.ServeHTTP(w, r)
		}
	})
	b.Run("shed", func(b *testing.B) {
		r := r.Clone(r.Context())
		r.Header.Set("If-None-Match", etag)
		r.Header.Set(HeaderCause, "push-notification")
		b.ReportAllocs()
		for b.Loop() {
			w := nopWriter{h: http.Header{}}
			h.ServeHTTP(w, r)
		}
	})
}

type nopWriter struct{ h http.Header }

func (w nopWriter) Header() http.Header         { return w.h }
func (w nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w nopWriter) WriteHeader(int)             {}

func TestFreshnessOverloadOfEnforcer(t *testing.T) {
	e, err := enforce.New()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	f, err := New(testSigner(t), WithRules(monzo(1)), WithOverloadOf(e, nil), WithOverloadHold(0),
		WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	balance := 1
	h := f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, balance) }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/b", nil))
	etag := w.Header().Get("ETag")
	balance = 2
	push := func() int {
		r := httptest.NewRequest(http.MethodGet, "/b", nil)
		r.Header.Set("If-None-Match", etag)
		r.Header.Set(HeaderCause, "push-notification")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, st := range []struct {
		level int
		want  int
	}{{0, 200}, {1, 304}, {e.Price().MaxLevel(), 304}, {0, 200}} {
		e.Price().SetLevel(now, st.level)
		if got := push(); got != st.want {
			t.Errorf("price level %d: %d, want %d", st.level, got, st.want)
		}
	}
}

func TestParseAppAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "9.5": 9500 * time.Millisecond, " 3 ": 3 * time.Second, "1e3": 1000 * time.Second} {
		if got, ok := parseAppAge(in); !ok || got != want {
			t.Errorf("parseAppAge(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1", "NaN", "Inf", "1e10", "ten", strings.Repeat("1", 17)} {
		if got, ok := parseAppAge(in); ok {
			t.Errorf("parseAppAge(%q) = %v accepted", in, got)
		}
	}
}

// FuzzFreshnessHeaders sends hostile headers: the middleware never panics,
// never sheds without a valid ETag, and never sheds an interactive cause.
func FuzzFreshnessHeaders(f *testing.F) {
	s := testSigner(f)
	good := s.Sign("/b", ResponseHash([]byte("1")), time.Unix(1_700_000_000, 0))
	f.Add(good, "push-notification", "3")
	f.Add(`W/"x", `+good, "GENERIC-RELOAD", "1e1")
	f.Add("*", "app-open", "-0")
	fr, _ := New(s, WithRules(monzo(3)), WithOverload(func() bool { return true }),
		WithClock(func() time.Time { return time.Unix(1_700_000_100, 0) }))
	h := fr.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("2")) }))
	f.Fuzz(func(t *testing.T, inm, cause, appAge string) {
		r := httptest.NewRequest(http.MethodGet, "/b", nil)
		r.Header.Set("If-None-Match", inm)
		r.Header.Set(HeaderCause, cause)
		r.Header.Set(HeaderAppAge, appAge)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Header().Get(HeaderShedRule) == "" {
			return
		}
		if !policy.ParseCause(cause).Sheddable() {
			t.Fatalf("cause %q shed", cause)
		}
		if _, _, _, ok := s.VerifyIfNoneMatch("/b", inm); !ok {
			t.Fatalf("If-None-Match %q shed without a valid etag", inm)
		}
	})
}
