package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// t0 is a fixed instant 10 s into a minute.
var t0 = time.Date(2026, 3, 4, 9, 0, 10, 0, time.UTC)

type fixture struct {
	t     *testing.T
	s     *Server
	clk   *clock
	mem   *memStore
	reg   *prometheus.Registry
	dir   string
	token string
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: &clock{t: t0}, mem: newMemStore(), dir: t.TempDir()}
	f.start(mutate...)
	return f
}

func (f *fixture) start(mutate ...func(*Config)) {
	f.t.Helper()
	f.reg = prometheus.NewRegistry()
	cfg := Config{
		Store: "duckdb://unused.duckdb", DataDir: f.dir, Writer: "w1",
		Registerer: f.reg, Now: f.clk.Now,
		OpenStore: func(string) (store.Store, error) { return f.mem, nil },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s = s
	f.token = s.Token()
}

func (f *fixture) stop() {
	f.t.Helper()
	if err := f.s.Shutdown(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// process makes reports the way an application process does.
type process struct {
	rec *meter.Recorder
	clk *clock
}

func newProcess(clk *clock, service, instance string) *process {
	rec, err := meter.NewRecorder(
		meter.WithSource(report.Source{Service: service, Instance: instance, Host: "h"}),
		meter.WithClock(clk.Now))
	if err != nil {
		panic(err) // the options are constant and valid
	}
	return &process{clk: clk, rec: rec}
}

// report records n requests of tenant (1 RU, 10 ms each) and cuts a report.
func (p *process) report(t *testing.T, tenantName string, n int, key string) []byte {
	t.Helper()
	for range n {
		p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: tenantName, Route: "GET /x", Tier: tenant.T2, Key: key},
			Kind: report.KindRequest, Duration: 10 * time.Millisecond, RU: 1, Bytes: 100})
	}
	rep := p.rec.Cut(p.clk.Now())
	b, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) ingest(body []byte) int {
	f.t.Helper()
	status, _, msg, _, _ := ingest(f.s, body)
	if status != http.StatusOK {
		f.t.Logf("ingest: %d %s", status, msg)
	}
	return status
}

func ru(r store.Rollup) float64     { return r.RU }
func count(r store.Rollup) float64  { return float64(r.Count) }
func errsOf(r store.Rollup) float64 { return float64(r.Errors) }

func TestMergeEmitDuplicateLate(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	a := newProcess(f.clk, "api", "a1")
	b := newProcess(f.clk, "api", "b1")
	ctx := context.Background()

	f.clk.Add(time.Second) // 09:00:11
	ra := a.report(t, "acme", 30, "k1")
	if f.ingest(ra) != 200 || f.ingest(b.report(t, "acme", 12, "k1")) != 200 {
		t.Fatal("refused")
	}
	// The same report again (a retry after a lost reply) is acknowledged
	// and not counted twice.
	if f.ingest(ra) != 200 {
		t.Fatal("duplicate refused")
	}
	if got := testutil.ToFloat64(f.s.met.duplicates); got != 1 {
		t.Fatalf("duplicates = %v", got)
	}
	// Step table on fixed instants: nothing is written before the minute
	// closes plus the grace period.
	steps := []struct {
		at     time.Time
		wantRU float64
		writes int
	}{
		{t0.Add(5 * time.Second), 0, 0},
		{time.Date(2026, 3, 4, 9, 1, 9, 0, time.UTC), 0, 0},   // minute closed, grace not over
		{time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC), 42, 1}, // grace over
		{time.Date(2026, 3, 4, 9, 1, 20, 0, time.UTC), 42, 1}, // nothing new: no rewrite
	}
	for i, st := range steps {
		f.clk.Set(st.at)
		f.s.Tick(ctx, st.at)
		if got := f.mem.sum("acme", "request", ru); got != st.wantRU || f.mem.writes != st.writes {
			t.Fatalf("step %d at %v: RU %v writes %d, want %v and %d", i, st.at, got, f.mem.writes, st.wantRU, st.writes)
		}
	}
	// A late report for 09:00 re-emits the cumulative row at a higher
	// version, which replaces the first.
	late := newProcess(f.clk, "api", "c1")
	late.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: report.KindRequest, RU: 1})
	rep := late.rec.Cut(time.Date(2026, 3, 4, 9, 0, 59, 0, time.UTC))
	rep.Start = time.Date(2026, 3, 4, 9, 0, 58, 0, time.UTC)
	rep.End = rep.Start.Add(time.Second)
	body, _ := rep.MarshalBinary()
	if f.ingest(body) != 200 {
		t.Fatal("late refused")
	}
	f.s.Tick(ctx, f.clk.Add(time.Second))
	if got := f.mem.sum("acme", "request", ru); got != 43 {
		t.Fatalf("after late report: RU %v, want 43", got)
	}
	if got := f.mem.sum("acme", "request", count); got != 43 {
		t.Fatalf("after late report: count %v, want 43", got)
	}
	f.mem.mu.Lock()
	nhot := len(f.mem.hot)
	f.mem.mu.Unlock()
	if nhot == 0 {
		t.Fatal("no hot keys written")
	}
}

func TestWALReplayAfterCrash(t *testing.T) {
	f := newFixture(t)
	last, crashed := crashWithLog(t, f) // replay_test.go
	// A second collector on the same data dir is refused while the first
	// lives; the kernel drops the lock when a process dies, as here.
	if _, err := New(Config{Store: StoreNone, DataDir: f.dir, Registerer: prometheus.NewRegistry()}); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second collector on one data dir: %v", err)
	}
	crashed.life.lock.Close()
	f.start()
	defer f.stop()
	// The retried last report is recognised as a duplicate after restart.
	if f.ingest(last) != 200 || testutil.ToFloat64(f.s.met.duplicates) != 1 {
		t.Fatal("retried report after restart was not recognised as a duplicate")
	}
	f.s.Tick(context.Background(), f.clk.Add(time.Second))
	if got := f.mem.sum("acme", "", count); got != 67 {
		t.Fatalf("after restart: count %v, want 67 (nothing lost, nothing doubled)", got)
	}
}

func TestHostileInput(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Token = "sekret"; c.SourceRate = 1 })
	defer f.stop()
	h := f.s.Handler()
	post := func(body []byte, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, api.PathReports, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", report.ContentType)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	p := newProcess(f.clk, "api", "p1")
	good := p.report(t, "acme", 3, "")
	future := make([]byte, len(good))
	copy(future, good)
	binary.BigEndian.PutUint16(future[4:], 99)

	cases := []struct {
		name   string
		body   []byte
		token  string
		status int
		reason string
	}{
		{"wrong token", good, "nope", 401, reasonUnauthorized},
		{"no token", good, "", 401, reasonUnauthorized},
		{"unknown version", future, "sekret", 400, reasonVersion},
		{"truncated", good[:len(good)/2], "sekret", 400, reasonMalformed},
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), "sekret", 400, reasonMalformed},
		{"empty", nil, "sekret", 400, reasonMalformed},
		{"oversized", make([]byte, report.MaxReportBytes+1), "sekret", 413, reasonTooLarge},
	}
	for _, c := range cases {
		w := post(c.body, c.token)
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, w.Code, c.status, w.Body)
			continue
		}
		r, err := report.DecodeReply(w.Body.Bytes())
		if err != nil || r.Accepted || r.Message == "" {
			t.Errorf("%s: reply %+v %v: want a refusal with a reason", c.name, r, err)
		}
		if got := testutil.ToFloat64(f.s.met.rejected.WithLabelValues(c.reason)); got < 1 {
			t.Errorf("%s: not counted under %s", c.name, c.reason)
		}
	}
	// The refusals lost nothing: the good report is still accepted.
	if w := post(good, "sekret"); w.Code != 200 {
		t.Fatalf("good report after refusals: %d %s", w.Code, w.Body)
	}
	r, _ := report.DecodeReply(post(good, "sekret").Body.Bytes())
	if !r.Accepted || r.Policy == nil {
		t.Fatalf("duplicate reply %+v", r)
	}

	// A hostile tenant value is data, never SQL or markup.
	hostile := "x'*/ DROP TABLE rollups; --"
	f.clk.Add(time.Second)
	if w := post(p.report(t, hostile, 5, ""), "sekret"); w.Code != 200 {
		t.Fatalf("hostile tenant: %d %s", w.Code, w.Body)
	}
	f.clk.Add(time.Second)
	snap := f.s.Snapshot(f.clk.Now(), api.MeasureRU, 10)
	found := false
	for _, tr := range snap.Tenants {
		found = found || tr.Tenant == hostile
	}
	if !found {
		t.Fatalf("hostile tenant missing from live view: %+v", snap.Tenants)
	}

	// A flood from one source is held back by admission; another source
	// still gets in.
	flood := newProcess(f.clk, "api", "flood")
	var refused int
	for range 20 {
		w := post(flood.report(t, "spam", 1, ""), "sekret")
		if w.Code == http.StatusTooManyRequests {
			refused++
			if w.Header().Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
	}
	if refused < 10 {
		t.Fatalf("flood: only %d of 20 refused", refused)
	}
	other := newProcess(f.clk, "api", "quiet")
	if w := post(other.report(t, "acme", 1, ""), "sekret"); w.Code != 200 {
		t.Fatalf("quiet source starved by the flood: %d", w.Code)
	}
}

func TestClockJumps(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	for _, c := range []struct {
		name string
		skew time.Duration
	}{{"future", 2 * time.Hour}, {"past", -3 * time.Hour}} {
		pc := &clock{t: f.clk.Now().Add(c.skew)}
		p := newProcess(pc, "api", c.name)
		pc.Add(time.Second)
		if f.ingest(p.report(t, "acme", 2, "")) != 200 {
			t.Fatalf("%s: refused", c.name)
		}
	}
	if got := testutil.ToFloat64(f.s.met.retimed); got != 2 {
		t.Fatalf("retimed = %v, want 2", got)
	}
	f.s.Tick(context.Background(), time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC))
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	for k, r := range f.mem.rollups {
		if k.minute != time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC).Unix() || r.Count != 4 {
			t.Fatalf("skewed reports should count in the arrival minute: %+v", r)
		}
	}
}

func TestPolicyEndpoint(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	c, _ := api.NewClient(srv.URL)
	ctx := context.Background()
	rule := policy.Rule{ID: "import", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 100,
		Reason: "catalog import", Expires: t0.Add(time.Hour)}
	if _, err := c.PostPolicy(ctx, rule, "wrong"); err == nil {
		t.Fatal("policy change without the token accepted")
	}
	bad := rule
	bad.Reason = ""
	if _, err := c.PostPolicy(ctx, bad, f.token); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("invalid rule: %v", err)
	}
	p, err := c.PostPolicy(ctx, rule, f.token)
	if err != nil || p.Version != 1 || len(p.Rules) != 1 || p.Rules[0].CreatedBy == "" {
		t.Fatalf("post: %v %+v", err, p)
	}
	// Every process gets it in its reply.
	pr := newProcess(f.clk, "api", "p")
	_, _, _, _, reply := ingest(f.s, pr.report(t, "acme", 1, ""))
	r, err := report.DecodeReply(reply)
	if rp := replyPolicy(r); err != nil || rp == nil || rp.Version != 1 || rp.Rules[0].Tenant != "bigcorp" {
		t.Fatalf("reply policy %+v %v", r, err)
	}
	// Lift it.
	rule.Expires = t0.Add(-time.Second)
	if p, err = c.PostPolicy(ctx, rule, f.token); err != nil || len(p.Rules) != 0 || p.Version != 2 {
		t.Fatalf("lift: %v %+v", err, p)
	}
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if len(f.mem.audit) != 2 || f.mem.audit[0].Action != "add" || f.mem.audit[1].Action != "lift" || !strings.Contains(f.mem.audit[0].Rule, "bigcorp") {
		t.Fatalf("audit %+v", f.mem.audit)
	}
}

func TestPolicySurvivesRestart(t *testing.T) {
	f := newFixture(t)
	rule := policy.Rule{ID: "r", Tier: tenant.T3, Action: policy.Price, Multiplier: 2, Reason: "ratio", Expires: t0.Add(time.Hour)}
	if _, err := f.s.SetRule(context.Background(), rule, "test"); err != nil {
		t.Fatal(err)
	}
	f.stop()
	f.start()
	defer f.stop()
	if p := f.s.Policy(); p.Version != 1 || len(p.Rules) != 1 {
		t.Fatalf("policy after restart %+v", p)
	}
}

func TestLiveTopNAndOther(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := newProcess(f.clk, "api", "p")
	for i := range 10 {
		for range 3 {
			p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "t" + string(rune('a'+i)), Route: "r"}, Kind: report.KindRequest,
				Duration: time.Millisecond, RU: float64(i + 1)})
		}
	}
	f.clk.Add(time.Second)
	body, _ := p.rec.Cut(f.clk.Now()).MarshalBinary()
	f.ingest(body)
	f.clk.Add(time.Second)
	snap := f.s.Snapshot(f.clk.Now(), api.MeasureRU, 3)
	if len(snap.Tenants) != 4 || snap.Tenants[0].Tenant != "tj" || snap.Tenants[3].Tenant != api.OtherTenant {
		t.Fatalf("tenants %+v", snap.Tenants)
	}
	var sumRU, sumShare float64
	for _, tr := range snap.Tenants {
		sumRU += tr.RUPerSec
		sumShare += tr.Share
	}
	// 3 × (1+…+10) RU in one second over a 10 s window.
	if d := sumRU - 16.5; d > 1e-9 || d < -1e-9 {
		t.Fatalf("top + other RU/s = %v, want exactly 16.5", sumRU)
	}
	if d := sumShare - 1; d > 1e-9 || d < -1e-9 {
		t.Fatalf("shares add to %v", sumShare)
	}
	if len(snap.Tenants[0].History) != api.HistoryLen || snap.Tenants[0].History[api.HistoryLen-1] != 30 {
		t.Fatalf("history %v", snap.Tenants[0].History[api.HistoryLen-3:])
	}
	b, _ := json.Marshal(snap)
	var back api.Snapshot
	if err := json.Unmarshal(b, &back); err != nil || back.Tenants[0].Tenant != "tj" {
		t.Fatal("snapshot JSON does not round-trip", err)
	}
}

// TestHugeValues: sums that would overflow to +Inf saturate, so the live
// JSON still encodes and the store still takes the minute.
// TestHugeValues: a count of 2^64−1, a duration of MaxInt64 ns or an RU of
// 1.5e308 used to be merged (and the counts to wrap); each is now refused
// with 400 and its reason, and the other tenants' figures stay intact.
func TestHugeValues(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	huge := []report.Row{
		{Tenant: "whale", Route: "r", Kind: report.KindRequest, Count: 1, RU: 1.5e308},
		{Tenant: "whale", Route: "r", Kind: report.KindRequest, Count: math.MaxUint64},
		{Tenant: "whale", Route: "r", Kind: report.KindDB, Count: 1, Duration: math.MaxInt64},
		{Tenant: "whale", Route: "r", Kind: report.KindRequest, Count: 1, Bytes: math.MaxUint64},
	}
	for i, row := range append(huge, report.Row{Tenant: "minnow", Route: "r", Kind: report.KindRequest, Count: 2, RU: 3}) {
		rep := &report.Report{Source: report.Source{Service: "api", Instance: "huge"}, Seq: uint64(i + 1),
			Start: f.clk.Now(), End: f.clk.Now().Add(time.Second), Rows: []report.Row{row}}
		body, err := rep.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		status, reason, msg, _, _ := ingest(f.s, body)
		if i < len(huge) {
			if status != http.StatusBadRequest || reason != reasonRange || !strings.Contains(msg, "at most") {
				t.Fatalf("row %+v: %d %s %q, want 400 %s with the bound", row, status, reason, msg, reasonRange)
			}
			continue
		}
		if status != 200 {
			t.Fatalf("normal report refused: %d %s", status, msg)
		}
	}
	f.clk.Add(time.Second)
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/live", nil))
	if w.Code != 200 {
		t.Fatalf("live view: %d %s", w.Code, w.Body)
	}
	f.s.Tick(context.Background(), time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC))
	if got := f.mem.sum("whale", "", count); got != 0 {
		t.Fatalf("whale stored %v", got)
	}
	if got := f.mem.sum("minnow", "", ru); got != 3 {
		t.Fatalf("minnow RU %v, want 3", got)
	}
}

func TestSumsSaturate(t *testing.T) {
	a := uint64(math.MaxUint64 - 1)
	if addSat(&a, 1) || a != math.MaxUint64 {
		t.Fatalf("exact sum: %d", a)
	}
	if !addSat(&a, 5) || a != math.MaxUint64 {
		t.Fatalf("overflow: %d, want saturated", a)
	}
}

// TestVersionSurvivesClockSetBack: after a restart with the clock set
// back, a re-emitted minute still gets a higher version than before.
func TestVersionSurvivesClockSetBack(t *testing.T) {
	f := newFixture(t)
	p := newProcess(f.clk, "api", "p")
	f.clk.Add(time.Second)
	f.ingest(p.report(t, "acme", 5, ""))
	f.s.Tick(context.Background(), time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC))
	f.mem.mu.Lock()
	var v1 uint64
	for _, r := range f.mem.rollups {
		v1 = r.Version
	}
	f.mem.mu.Unlock()
	f.stop()
	f.clk.Set(t0.Add(-time.Hour)) // the clock was set back an hour
	f.start()
	defer f.stop()
	f.s.Tick(context.Background(), time.Date(2026, 3, 4, 9, 1, 11, 0, time.UTC))
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	for _, r := range f.mem.rollups {
		if r.Version <= v1 || r.Count != 5 {
			t.Fatalf("re-emitted row: version %d (before %d), count %d", r.Version, v1, r.Count)
		}
	}
}

// TestCollectorClockBack: when the collector's own clock goes back past a
// minute already written for good, new reports never reopen that minute
// (which would replace its rows with a part of them).
func TestCollectorClockBack(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := newProcess(f.clk, "api", "p")
	f.clk.Add(time.Second)
	f.ingest(p.report(t, "acme", 5, ""))
	done := time.Date(2026, 3, 4, 9, 1, 10, 0, time.UTC).Add(DefaultLateKeep)
	f.s.Tick(context.Background(), done) // 09:00 written and closed for good
	f.clk.Set(t0.Add(2 * time.Second))   // the clock goes back into 09:00
	q := newProcess(f.clk, "api", "q")
	f.clk.Add(time.Second)
	f.ingest(q.report(t, "acme", 3, ""))
	f.s.Tick(context.Background(), done.Add(time.Hour))
	if got := f.mem.sum("acme", "", count); got != 8 {
		t.Fatalf("count %v, want 8 (5 kept in 09:00, 3 in the next minute)", got)
	}
}
