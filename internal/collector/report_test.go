package collector

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

func reportStore() *memStore {
	m := newMemStore()
	min := t0.Truncate(time.Minute)
	m.WriteRollups(context.Background(), []store.Rollup{
		{Minute: min, Writer: "w", Version: 1, Service: "api", Tenant: "bigcorp", Route: "POST /import", Kind: "request", Count: 10, RU: 600},
		{Minute: min, Writer: "w", Version: 1, Service: "api", Tenant: "acme", Route: "GET /x", Kind: "request", Count: 90, RU: 300},
		{Minute: min, Writer: "w", Version: 1, Service: "api", Tenant: "=cmd|' /C calc'!A0", Route: "GET /x", Kind: "request", Count: 1, RU: 50},
		{Minute: min, Writer: "w", Version: 1, Service: "", Tenant: "", Route: "", Kind: "pg", Count: 5, ActiveSessionSeconds: 5},
		{Minute: min, Writer: "w", Version: 1, Service: "api", Tenant: report.UnknownTenant, Route: "GET /x", Kind: "request", Count: 1, RU: 50},
	})
	return m
}

func TestCostReport(t *testing.T) {
	req := ReportRequest{From: t0.Add(-50 * time.Hour), To: t0.Add(time.Hour), Cost: 1000, Currency: "EUR"}
	var steps []float64
	st := reportStore()
	rep, err := BuildReport(context.Background(), st, req, func(d float64) { steps = append(steps, d) })
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0] != 1 || st.usageCalls != 1 {
		t.Fatalf("progress %v after %d queries: want the range in one query", steps, st.usageCalls)
	}
	if rep.Lines[0].Tenant != "bigcorp" || rep.Lines[0].Share != 0.6 || rep.Lines[0].Cost != 600 {
		t.Fatalf("first line %+v", rep.Lines[0])
	}
	last := rep.Lines[len(rep.Lines)-1]
	if last.Tenant != Unattributed || last.RU != 50 || last.DBSeconds != 5 || last.Cost != 50 {
		t.Fatalf("unattributed line %+v", last)
	}
	// CSV: a tenant that looks like a formula is neutralised.
	var buf bytes.Buffer
	if err := rep.Write(&buf, FormatCSV, false); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(recs) != len(rep.Lines)+2 || recs[0][0] != "tenant" {
		t.Fatalf("csv %v %v", recs, err)
	}
	for _, r := range recs {
		if strings.HasPrefix(r[0], "=") {
			t.Fatalf("formula left in CSV: %q", r[0])
		}
	}
	buf.Reset()
	if err := rep.Write(&buf, FormatJSON, false); err != nil {
		t.Fatal(err)
	}
	var back CostReport
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Total.Cost != 1000 {
		t.Fatalf("json %v %+v", err, back.Total)
	}
	buf.Reset()
	if err := rep.Write(&buf, FormatTable, false); err != nil || !strings.Contains(buf.String(), "(unattributed)") || !strings.Contains(buf.String(), "1000.00 EUR") {
		t.Fatalf("table %v\n%s", err, buf.String())
	}
	if err := rep.Write(&buf, "xlsx", false); !errors.Is(err, ErrReport) {
		t.Fatalf("bad format: %v", err)
	}
}

func TestCostReportEndpoint(t *testing.T) {
	f, h := reportFixture(t)
	get := func(q string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?"+q, nil))
		return w
	}
	w := get("from=" + t0.Add(-time.Hour).Format(time.RFC3339) + "&to=" + t0.Add(time.Hour).Format(time.RFC3339) + "&by=tenant,route&format=csv&cost=10")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "POST /import") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	for _, q := range []string{"measure=vibes", "from=soon", "by=route", "format=pdf", "cost=-1", "from=2026-03-05&to=2026-03-04"} {
		if w := get(q); w.Code != 400 {
			t.Errorf("%s: %d, want 400", q, w.Code)
		}
	}
	// A range of centuries used to run a query per day (740,000 of them);
	// an age of 10^11 days overflowed to 1829 and burned a core.
	calls := f.mem.usageCalls
	for q, reason := range map[string]string{
		"from=0001-01-01":               "1970 to 2105",
		"from=2020-01-01":               "at most 400 days",
		"from=99999999999d":             "at most 36600d",
		"from=100000h":                  "at most 400 days",
		"from=1960-01-01&to=1960-02-01": "1970 to 2105",
	} {
		w := get(q)
		if w.Code != 400 || !strings.Contains(w.Body.String(), reason) {
			t.Errorf("%s: %d %s, want 400 saying %q", q, w.Code, w.Body, reason)
		}
	}
	if f.mem.usageCalls != calls {
		t.Fatalf("refused ranges ran %d store queries", f.mem.usageCalls-calls)
	}
	if w := get("from=300d"); w.Code != 200 || f.mem.usageCalls != calls+1 {
		t.Fatalf("300 days: %d, %d queries, want one", w.Code, f.mem.usageCalls-calls)
	}
}

func TestParseTime(t *testing.T) {
	now := t0
	cases := map[string]time.Time{
		"now":                  now,
		"24h":                  now.Add(-24 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"2026-03-01":           time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		"2026-03-01T10:00:00Z": time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
	}
	for in, want := range cases {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-5h", "yesterday", "7x"} {
		if _, err := ParseTime(bad, now); !errors.Is(err, ErrReport) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"now", "24h", "7d", "2026-03-01", "2026-03-01T10:00:00Z", "-1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, t0)
		if err == nil && got.After(t0) && !strings.Contains(s, "T") && !strings.Contains(s, "-") {
			t.Fatalf("%q gave %v, after now", s, got)
		}
	})
}

// FuzzReadWAL: whatever a WAL file holds (a torn write, a flipped bit),
// replay never fails or panics, hands on only intact records, and leaves
// the file cut to them.
func FuzzReadWAL(f *testing.F) {
	var good []byte
	w := &walFile{}
	dir := f.TempDir()
	p := filepath.Join(dir, "seed")
	fh, _ := os.Create(p)
	w.f = fh
	w.append([]byte("hello"))
	w.append([]byte("world!"))
	fh.Close()
	good, _ = os.ReadFile(p)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "w.wal")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		var n int
		cut, err := readWAL(p, func(body []byte) error { n += 8 + len(body); return nil })
		if err != nil {
			t.Fatal(err)
		}
		after, _ := os.ReadFile(p)
		if int64(len(after)) != int64(len(b))-cut || len(after) != n || !bytes.Equal(after, b[:len(after)]) {
			t.Fatalf("file %d bytes → %d, records %d, cut %d", len(b), len(after), n, cut)
		}
		// Replaying the cut file again cuts nothing.
		if cut2, _ := readWAL(p, func([]byte) error { return nil }); cut2 != 0 {
			t.Fatalf("second replay cut %d", cut2)
		}
	})
}

func TestMetricsLint(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := newProcess(f.clk, "api", "p")
	f.clk.Add(time.Second)
	f.ingest(p.report(t, "acme", 3, "k"))
	f.s.Tick(t.Context(), f.clk.Now()) // the per-tenant series take the second's work at the tick
	problems, err := testutil.GatherAndLint(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("metric %s: %s", pr.Metric, pr.Text)
	}
	if n, err := testutil.GatherAndCount(f.reg, "qtop_collector_tenant_ru_total"); err != nil || n != 2 { // acme and other
		t.Fatalf("per-tenant series: %d %v", n, err)
	}
	if got := testutil.ToFloat64(f.s.met.accepted); got != 1 {
		t.Fatalf("accepted %v", got)
	}
}

// FuzzIngest: no body makes Ingest panic; a body is merged only when it
// decodes, and a refused body changes no count.
func FuzzIngest(f *testing.F) {
	clk := &clock{t: t0}
	p := newProcess(clk, "s", "i")
	for range 3 {
		p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Key: "k"}, RU: 1})
	}
	good, _ := p.rec.Cut(clk.Add(time.Second)).MarshalBinary()
	f.Add(good)
	f.Add(good[:20])
	f.Add([]byte("qtrp\x00\x01\x00\x00garbage"))
	s, err := New(Config{Store: StoreNone, DataDir: f.TempDir(), Registerer: prometheus.NewRegistry(), Now: clk.Now, IntakeConfig: IntakeConfig{SourceRate: 1e9}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Shutdown(context.Background()) })
	f.Fuzz(func(t *testing.T, b []byte) {
		before := testutil.ToFloat64(s.met.accepted) + testutil.ToFloat64(s.met.duplicates)
		status, reason, msg, _, reply := ingest(s, b)
		after := testutil.ToFloat64(s.met.accepted) + testutil.ToFloat64(s.met.duplicates)
		_, derr := reports.Decode(b)
		switch {
		case status == http.StatusOK && (derr != nil || after != before+1 || len(reply) == 0):
			t.Fatalf("accepted a body that does not decode (%v) or was not counted", derr)
		case status != http.StatusOK && (after != before || reason == "" || msg == ""):
			t.Fatalf("refusal %d changed counts or gave no reason (%q %q)", status, reason, msg)
		}
	})
}

// GET /v1/report?tenant= keeps one tenant's lines, each with its share
// and cost of every tenant's total; the total line sums the lines kept.
func TestCostReportTenant(t *testing.T) {
	_, h := reportFixture(t)
	get := func(q string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?from="+t0.Add(-time.Hour).Format(time.RFC3339)+"&to="+t0.Add(time.Hour).Format(time.RFC3339)+"&cost=1000&"+q, nil))
		return w
	}
	for _, by := range []string{"tenant", "tenant,route"} {
		w := get("by=" + by + "&tenant=bigcorp")
		var rep CostReport
		if err := json.Unmarshal(w.Body.Bytes(), &rep); w.Code != 200 || err != nil {
			t.Fatalf("by %s: %d %s %v", by, w.Code, w.Body, err)
		}
		if len(rep.Lines) != 1 || rep.Lines[0].Tenant != "bigcorp" || rep.Lines[0].Share != 0.6 || rep.Lines[0].Cost != 600 {
			t.Errorf("by %s: lines %+v, want bigcorp's alone, 0.6 of the total, 600", by, rep.Lines)
		}
		if want := (CostLine{Tenant: TotalLine, Requests: 10, RU: 600, Share: 0.6, Cost: 600}); rep.Total != want {
			t.Errorf("by %s: total %+v, want %+v", by, rep.Total, want)
		}
	}
	for _, q := range []string{"tenant=(untagged)", "tenant=a&tenant=b"} {
		if w := get(q); w.Code != 400 {
			t.Errorf("%s: %d, want 400", q, w.Code)
		}
	}
}

// reportFixture is a collector over reportStore and its handler.
func reportFixture(t *testing.T) (*fixture, http.Handler) {
	f := newFixture(t)
	t.Cleanup(f.stop)
	f.mem = reportStore()
	f.s.em.store = f.mem
	return f, f.s.Handler()
}
