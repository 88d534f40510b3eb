package collector

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// minuteStore holds one request of 1 RU for tenant t in each of the n
// minutes from start.
func minuteStore(start time.Time, n int, tenants ...string) *memStore {
	m := newMemStore()
	var rows []store.Rollup
	for i := range n {
		for _, t := range tenants {
			rows = append(rows, store.Rollup{Minute: start.Add(time.Duration(i) * time.Minute), Writer: "w", Version: 1,
				Service: "api", Tenant: t, Route: "GET /x", Kind: "request", Count: 1, RU: 1})
		}
	}
	m.WriteRollups(context.Background(), rows)
	return m
}

// TestCostReportWholeMinutes: a report counts whole minutes and says
// which: its bounds are those of the minutes it counted, two reports that
// share an unaligned bound count each minute once, and a range within one
// minute is refused rather than answered with zeros.
func TestCostReportWholeMinutes(t *testing.T) {
	m0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	st := minuteStore(m0, 5, "acme")
	build := func(from, to time.Time) *CostReport {
		t.Helper()
		rep, err := BuildReport(context.Background(), st, ReportRequest{From: from, To: to}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := build(m0.Add(30*time.Second), m0.Add(2*time.Minute+30*time.Second))
	if !rep.From.Equal(m0) || !rep.To.Equal(m0.Add(2*time.Minute)) || rep.Total.Requests != 2 {
		t.Fatalf("09:00:30 – 09:02:30: report says %v – %v with %d minutes, want 09:00 – 09:02 with 2",
			rep.From, rep.To, rep.Total.Requests)
	}
	cut := m0.Add(2*time.Minute + 10*time.Second)
	a, b := build(m0, cut), build(cut, m0.Add(5*time.Minute))
	if a.Total.Requests+b.Total.Requests != 5 || !a.To.Equal(b.From) {
		t.Fatalf("split at 09:02:10: %d + %d minutes (%v, %v), want 5 counted once", a.Total.Requests, b.Total.Requests, a.To, b.From)
	}
	// An offset is the same instant.
	paris := time.FixedZone("+01:00", 3600)
	if r := build(m0.In(paris), m0.Add(3*time.Minute).In(paris)); !r.From.Equal(m0) || r.From.Location() != time.UTC || r.Total.Requests != 3 {
		t.Fatalf("offset bounds: %v – %v, %d", r.From, r.To, r.Total.Requests)
	}
	_, err := BuildReport(context.Background(), st, ReportRequest{From: m0.Add(10 * time.Second), To: m0.Add(50 * time.Second)}, nil)
	if !errors.Is(err, ErrReport) || !strings.Contains(err.Error(), "no whole minute") {
		t.Fatalf("09:00:10 – 09:00:50: %v, want refused as holding no whole minute", err)
	}
}

// TestCostReportCentsAddUp: the parts of a shared cost add up to the cost
// to the cent, in every format, however the shares fall.
func TestCostReportCentsAddUp(t *testing.T) {
	m0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		tenants []string
		cost    float64
	}{
		{[]string{"a", "b", "c"}, 100},
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, 12000},
		{[]string{"a", "b", "c", "d", "e", "f"}, 0.05},
		{[]string{"a", "b", "c"}, 100.005},
	} {
		st := minuteStore(m0, 1, c.tenants...)
		rep, err := BuildReport(context.Background(), st, ReportRequest{From: m0, To: m0.Add(time.Minute), Cost: c.cost}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := rep.Write(&buf, FormatCSV, false); err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(&buf).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, r := range recs[1 : len(recs)-1] {
			sum += cents(t, r[len(r)-1])
		}
		total := cents(t, recs[len(recs)-1][len(recs[0])-1])
		if sum != total || total != int64(math.Round(c.cost*100)) {
			t.Errorf("%d tenants, cost %v: lines add up to %d cents, total line %d:\n%v", len(c.tenants), c.cost, sum, total, recs)
		}
		var jsum float64
		for _, l := range rep.Lines {
			jsum += l.Cost
		}
		if math.Abs(jsum-rep.Total.Cost) > 1e-6 {
			t.Errorf("cost %v: JSON lines add up to %v, total %v", c.cost, jsum, rep.Total.Cost)
		}
	}
}

func cents(t *testing.T, s string) int64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cost %q: %v", s, err)
	}
	return int64(math.Round(f * 100))
}

// TestCostReportTotalLine: a tenant called "total" is one of the lines, and
// the total line cannot be taken for a tenant's.
func TestCostReportTotalLine(t *testing.T) {
	m0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	rep, err := BuildReport(context.Background(), minuteStore(m0, 1, "total", "acme"), ReportRequest{From: m0, To: m0.Add(time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Write(&buf, FormatCSV, false)
	recs, _ := csv.NewReader(&buf).ReadAll()
	named := map[string]int{}
	for _, r := range recs[1:] {
		named[r[0]]++
	}
	if named["total"] != 1 || named[TotalLine] != 1 || recs[len(recs)-1][0] != TotalLine || recs[len(recs)-1][1] != "2" {
		t.Fatalf("tenant total beside the total line: %v", recs)
	}
}

// TestCostReportCSVNames: in a CSV, no tenant name reads as a formula, and
// two tenants never read as one ("=x" and "'=x", which the apostrophe that
// neutralises a formula would otherwise make alike).
func TestCostReportCSVNames(t *testing.T) {
	m0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	names := []string{"=x", "'=x", "+1", "-1", "@SUM(A1)", "acme, inc.", `say "hi"`, "=HYPERLINK(\"http://e.example\",\"x\")"}
	rep, err := BuildReport(context.Background(), minuteStore(m0, 1, names...), ReportRequest{From: m0, To: m0.Add(time.Minute)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	rep.Write(&buf, FormatCSV, false)
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(recs) != len(names)+2 { // the header, the names, the total
		t.Fatalf("%d records, %v: %v", len(recs), err, recs)
	}
	seen := map[string]bool{}
	for _, r := range recs[1:] {
		if strings.ContainsAny(r[0][:1], "=+-@\t\r") {
			t.Errorf("%q reads as a formula", r[0])
		}
		if seen[r[0]] {
			t.Errorf("two tenants read %q", r[0])
		}
		seen[r[0]] = true
	}
}

// TestCostReportQueryStrict: GET /v1/report refuses a query it would
// otherwise misread — a pair that does not decode (dropped, so the default
// 24 h was reported), a parameter it does not know (a tenant filter it
// does not have, so every tenant was reported), one given twice, a range
// in the future, an absurd cost — with a 400 that says why, and no store
// query.
func TestCostReportQueryStrict(t *testing.T) {
	f, h := reportFixture(t)
	for q, reason := range map[string]string{
		"from=%zz":                      "does not decode",
		"from=2026-03-01;to=2026-03-02": "does not decode",
		"tenants=acme":                  `unknown parameter`,
		"tenant=(untagged)":             "reserved",
		"from=24h&from=1h":              `given 2 times`,
		"format=csv&format=json":        `given 2 times`,
		"from=2027-01-01&to=2027-02-01": "in the future",
		"cost=1e308":                    "from 0 to 1e+12",
		"cost=0x1p10":                   "decimal",
		"from=" + t0.Add(-5*time.Second).Format(time.RFC3339): "no whole minute", // now is 09:00:10
	} {
		calls := f.mem.usageCalls
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?"+q, nil))
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), reason) || f.mem.usageCalls != calls {
			t.Errorf("%s: %d %s (%d store queries), want 400 saying %q", q, w.Code, strings.TrimSpace(w.Body.String()), f.mem.usageCalls-calls, reason)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?from=2h&to=now&by=tenant&measure=ru&cost=10&currency=EUR&format=csv&tenant=acme", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("every parameter once: %d %s", w.Code, w.Body)
	}
}

// TestFreshnessReportRoutes: a route in the repeat-share report is no
// formula in its CSV and moves no cursor in its table.
func TestFreshnessReportRoutes(t *testing.T) {
	v := api.Freshness{RepeatWindow: 86400, LiveWindow: 300,
		Routes: []api.FreshnessRoute{{Route: "=HYPERLINK(\"http://e.example\",\"x\")", Samples: 2, Repeats: 1, RepeatShare: 0.5}, {Route: "GET /\x1b[2J\u202e", Samples: 1}},
		Rules:  []api.FreshnessRule{{Rule: "r\x1b]0;t\a", Route: "GET /\x1b[2J", Precision: -1}}}
	var buf bytes.Buffer
	if err := WriteFreshness(&buf, v, FormatCSV); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(recs) != 3 || !strings.HasPrefix(recs[1][0], "'=") {
		t.Fatalf("csv %v %v", recs, err)
	}
	buf.Reset()
	if err := WriteFreshness(&buf, v, FormatTable); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); strings.ContainsAny(s, "\x1b\a\u202e") {
		t.Fatalf("table passes control characters: %q", s)
	}
}

// TestCostReportWaitsForUnwrittenMinute: a minute that ended and is not
// in the store yet (its grace) makes a cost report of it answer 503 with
// when to ask again, not a sum without it; once written, the report has
// it. A report that ends before it is answered at once.
func TestCostReportWaitsForUnwrittenMinute(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := newProcess(f.clk, "api", "a1")
	f.clk.Add(time.Second) // 09:00:11
	if f.ingest(p.report(t, "acme", 30, "")) != 200 {
		t.Fatal("refused")
	}
	get := func(from, to time.Time) (int, string, string) {
		q := "from=" + from.Format(time.RFC3339) + "&to=" + to.Format(time.RFC3339) + "&format=csv"
		req := httptest.NewRequest(http.MethodGet, "/v1/report?"+q, nil)
		w := httptest.NewRecorder()
		f.s.Handler().ServeHTTP(w, req)
		return w.Code, w.Header().Get("Retry-After"), w.Body.String()
	}
	m0 := t0.Truncate(time.Minute)
	f.clk.Set(m0.Add(time.Minute + 3*time.Second)) // 09:01:03: ended, in its grace
	f.s.Tick(context.Background(), f.clk.Now())
	code, retry, body := get(m0.Add(-time.Hour), f.clk.Now())
	if code != http.StatusServiceUnavailable || retry != "7" || !strings.Contains(body, "not written yet") {
		t.Fatalf("in the minute's grace: %d (Retry-After %q) %s", code, retry, body)
	}
	if code, _, body := get(m0.Add(-time.Hour), m0); code != http.StatusOK {
		t.Fatalf("a report that ends before it: %d %s", code, body)
	}
	f.clk.Set(m0.Add(time.Minute + 11*time.Second)) // written at its grace's end
	f.s.Tick(context.Background(), f.clk.Now())
	if code, _, body := get(m0.Add(-time.Hour), f.clk.Now()); code != http.StatusOK || !strings.Contains(body, "acme,30,") {
		t.Fatalf("once written: %d %s", code, body)
	}
}

// A report reaching back past the collector's retention says the minutes
// before it are deleted (200 with zeros said nothing); one within it
// says nothing.
func TestCostReportNotesRetention(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, func(c *Config) {
		c.Retention, c.OpenStore, c.Store = 36*time.Hour, nil, "duckdb://"+filepath.Join(dir, "q.duckdb")
	})
	defer f.stop()
	get := func(from time.Time) string {
		q := "from=" + from.Format(time.RFC3339) + "&to=" + t0.Truncate(time.Minute).Format(time.RFC3339) + "&format=json"
		w := httptest.NewRecorder()
		f.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?"+q, nil))
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		var rep CostReport
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rep.Note
	}
	if n := get(t0.Add(-48 * time.Hour)); !strings.Contains(n, "past the collector's retention (36h0m0s)") {
		t.Errorf("48 h back: note %q", n)
	}
	if n := get(t0.Add(-24 * time.Hour)); n != "" {
		t.Errorf("24 h back: note %q", n)
	}
}

// TestCostReportCountsFromRetention: a store that still holds minutes
// past the retention (ClickHouse drops whole days) does not count them
// in a report whose note says they are deleted: the report counts from
// the horizon, and says so in its range. Before, a trial's report over
// 6 h past a 36 h retention counted 11.5 million requests beside that note.
func TestCostReportCountsFromRetention(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, func(c *Config) {
		c.Retention, c.OpenStore, c.Store = 36*time.Hour, nil, "duckdb://"+filepath.Join(dir, "q.duckdb")
	})
	defer f.stop()
	now := f.clk.Now()
	row := func(ago time.Duration, n uint64) store.Rollup {
		r := storetest.Row(0, "w1", "acme", "/a", n)
		r.Minute = now.Add(-ago).Truncate(time.Minute)
		return r
	}
	// Written after the retention's pass at start, as a day's partition
	// ClickHouse has not dropped yet.
	if err := f.s.Store().WriteRollups(context.Background(), []store.Rollup{row(40*time.Hour, 1000), row(2*time.Hour, 7)}); err != nil {
		t.Fatal(err)
	}
	q := "from=" + now.Add(-48*time.Hour).Format(time.RFC3339) + "&to=" + now.Add(-time.Hour).Truncate(time.Minute).Format(time.RFC3339) + "&format=json"
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?"+q, nil))
	var rep CostReport
	if err := json.Unmarshal(w.Body.Bytes(), &rep); w.Code != http.StatusOK || err != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	horizon := now.Add(-36 * time.Hour).UTC().Truncate(time.Minute)
	var n uint64
	for _, l := range rep.Lines {
		n += l.Requests
	}
	if n != 7 || !rep.From.Equal(horizon) || !strings.Contains(rep.Note, "past the collector's retention") {
		t.Fatalf("%d requests from %v (note %q), want 7 from %v", n, rep.From, rep.Note, horizon)
	}
}

// TestCostReportEndingBeforeRetention: on ClickHouse, which drops a day's
// partition only once the whole day is past the retention, a report whose
// range ends before the horizon counted the minutes of the straddling day
// that the store still held, beside a note saying they are deleted and
// count nothing; a DuckDB collector, which deletes them, answered zero for
// the same range. Such a report counts nothing, on every store.
func TestCostReportEndingBeforeRetention(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	waitClickHouse(t, addr)
	db := fmt.Sprintf("qtop_col_horizon_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}}); err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
			conn.Close()
		}
	})
	f := newFixture(t, func(c *Config) {
		c.Retention, c.OpenStore, c.Store = 36*time.Hour, nil, "clickhouse://"+addr+"/"+db
	})
	defer f.stop()
	now := f.clk.Now()
	horizon := now.Add(-36 * time.Hour).UTC().Truncate(time.Minute)
	// 40 h before t0 (09:00) is the day before the horizon's day: 17:00
	// of 2 March, the horizon 21:00 of the same day, so ClickHouse keeps
	// the partition until all of 2 March is past.
	r := storetest.Row(0, "w1", "acme", "/a", 1000)
	r.Minute = now.Add(-40 * time.Hour).Truncate(time.Minute)
	if err := f.s.Store().WriteRollups(context.Background(), []store.Rollup{r}); err != nil {
		t.Fatal(err)
	}
	q := "from=" + now.Add(-48*time.Hour).Format(time.RFC3339) + "&to=" + horizon.Add(-time.Hour).Format(time.RFC3339) + "&format=json"
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?"+q, nil))
	var rep CostReport
	if err := json.Unmarshal(w.Body.Bytes(), &rep); w.Code != http.StatusOK || err != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var n uint64
	for _, l := range rep.Lines {
		n += l.Requests
	}
	if n != 0 || !strings.Contains(rep.Note, "past the collector's retention") {
		t.Fatalf("%d requests (note %q), want none: the range ends before the horizon %v", n, rep.Note, horizon)
	}
}

// TestCostReportNotesFutureEnd: a report asked of a collector that ends
// after the minute open now counts nothing from that minute on, and said
// nothing of it: a bill "to" midnight, asked at 09:00, read as the whole
// day. It says so now, in its note and, for a CSV, in Qtop-Report-Note;
// one that ends now says nothing.
func TestCostReportNotesFutureEnd(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	get := func(to string) (string, string) {
		q := "from=" + t0.Add(-time.Hour).Format(time.RFC3339) + "&to=" + to + "&format="
		var notes [2]string
		for i, format := range []string{"json", "csv"} {
			w := httptest.NewRecorder()
			f.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/report?"+q+format, nil))
			if w.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", format, w.Code, w.Body)
			}
			notes[i] = w.Header().Get(NoteHeader)
			if format == "json" {
				var rep CostReport
				if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
					t.Fatal(err)
				}
				if rep.Note != notes[i] {
					t.Errorf("note %q, header %q", rep.Note, notes[i])
				}
			}
		}
		return notes[0], notes[1]
	}
	open := t0.Truncate(time.Minute).Format(time.RFC3339)
	if j, c := get("2026-03-05"); !strings.Contains(j, "the minutes from "+open+" (the one open now) on are not recorded yet") || c != j {
		t.Errorf("to tomorrow: note %q, CSV's %q", j, c)
	}
	if j, c := get("now"); j != "" || c != "" {
		t.Errorf("to now: note %q, CSV's %q", j, c)
	}
}

// TestCostReportNothingMeasured: a shared cost over a range with no
// usage says that no tenant carries it, rather than a total line alone
// holding the whole cost at 0%.
func TestCostReportNothingMeasured(t *testing.T) {
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rep, err := buildReport(context.Background(), pastRetention{}, ReportRequest{From: from, To: from.Add(time.Hour), Cost: 12000, Currency: "USD"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "no ru was recorded in the range: the cost of 12000.00 USD is split among no tenant"; rep.Note != want || len(rep.Lines) != 0 {
		t.Fatalf("note %q, %d lines; want %q", rep.Note, len(rep.Lines), want)
	}
}

// TestCostReportRoutesAddUpToTenant: by route, a tenant's lines add up to
// the cents a report by tenant bills it, to the cent, and so does its
// bill alone (tenant=). Rounded line by line, acme's two routes of 10.6
// cents each would take both spare cents of the bill (22 cents) while a
// report by tenant bills acme 21 (21.2, the spare cent going to beta's
// 40.5).
func TestCostReportRoutesAddUpToTenant(t *testing.T) {
	m0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	st := newMemStore()
	var rows []store.Rollup
	for _, r := range []struct {
		tenant, route string
		n             uint64
	}{{"acme", "GET /a", 106}, {"acme", "GET /b", 106}, {"beta", "GET /a", 405}, {"gamma", "GET /a", 383}} {
		rows = append(rows, store.Rollup{Minute: m0, Writer: "w", Version: 1, Service: "api", Tenant: r.tenant, Route: r.route, Kind: "request", Count: r.n})
	}
	st.WriteRollups(context.Background(), rows)
	build := func(byRoute bool, only string) *CostReport {
		t.Helper()
		rep, err := BuildReport(context.Background(), st, ReportRequest{From: m0, To: m0.Add(time.Minute), ByRoute: byRoute,
			Measure: MeasureRequests, Cost: 1, Tenant: only}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	billed := map[string]int64{}
	for _, l := range build(false, "").Lines {
		billed[l.Tenant] = int64(math.Round(l.Cost * 100))
	}
	if want := map[string]int64{"acme": 21, "beta": 41, "gamma": 38}; fmt.Sprint(billed) != fmt.Sprint(want) {
		t.Fatalf("by tenant: %v cents, want %v", billed, want)
	}
	byRoute := map[string]int64{}
	var sum int64
	for _, l := range build(true, "").Lines {
		c := int64(math.Round(l.Cost * 100))
		byRoute[l.Tenant] += c
		sum += c
	}
	if fmt.Sprint(byRoute) != fmt.Sprint(billed) || sum != 100 {
		t.Errorf("by route, tenants' lines add up to %v cents (%d in all), want %v as billed by tenant (100)", byRoute, sum, billed)
	}
	for tn, c := range billed {
		for _, by := range []bool{false, true} {
			if got := int64(math.Round(build(by, tn).Total.Cost * 100)); got != c {
				t.Errorf("%s alone (by route %v): %d cents, want %d", tn, by, got, c)
			}
		}
	}
}
