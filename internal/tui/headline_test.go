package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/qtop-dev/qtop/api"
)

// sortedBy is s as a source sorted by measure sends it: Share is of that
// measure and the rows are in its order; History stays RU (not db).
func sortedBy(s api.Snapshot, measure string) api.Snapshot {
	s.Measure = measure
	s.Tenants = slices.Clone(s.Tenants)
	val := func(r *api.TenantRow) float64 {
		if measure == api.MeasureErr {
			return r.ErrPerSec
		}
		return r.P95Seconds
	}
	var total float64
	for i := range s.Tenants {
		r := &s.Tenants[i]
		if r.Tenant == "t03" {
			r.ErrPerSec = 9 // acme's case in the demo: a third of the errors
		} else {
			r.ErrPerSec = 1
		}
		total += val(r)
	}
	for i := range s.Tenants {
		s.Tenants[i].Share = val(&s.Tenants[i]) / total
	}
	slices.SortStableFunc(s.Tenants, func(a, b api.TenantRow) int {
		return -strings.Compare(strings.Repeat("x", int(val(&a)*1000)), strings.Repeat("x", int(val(&b)*1000)))
	})
	return s
}

// TestHeadlineIgnoresSort: sorted by ERR/s or P95 the headline names the
// same offender with the same share of RU, and the same victims.
func TestHeadlineIgnoresSort(t *testing.T) {
	var ru, errs, p95 summary
	for i := range 50 {
		s := incidentAt(i)
		ru.add(&s)
		e := sortedBy(s, api.MeasureErr)
		errs.add(&e)
		p := sortedBy(s, api.MeasureP95)
		p95.add(&p)
		if errs.line != ru.line || p95.line != ru.line {
			t.Fatalf("second %d:\nru:  %q\nerr: %q\np95: %q", i, ru.line, errs.line, p95.line)
		}
	}
	if !strings.Contains(ru.line, "bigcorp 80% of RU") || !strings.Contains(ru.line, "victims: 20 tenants") {
		t.Fatalf("%q", ru.line)
	}
}

// TestHeadlineAfterCollectorRestart: load constant for minutes (the
// import ran before this qtop started, so nothing rose while it watched),
// then the collector restarts and its history starts empty; this qtop
// remembers the load it saw and says nothing new.
func TestHeadlineAfterCollectorRestart(t *testing.T) {
	var in summary
	const from = 40 + api.HistoryLen // the source's history is all import
	for i := from; i < from+200; i++ {
		s := incidentAt(i)
		s.Collector.Uptime = time.Duration(i+1000) * time.Second
		in.add(&s)
	}
	if strings.Contains(in.line, "bigcorp") {
		t.Fatalf("constant load flagged: %q", in.line)
	}
	for up := 1; up <= 15; up++ {
		s := incidentAt(from + 200 + up)
		s.Collector.Uptime = time.Duration(up) * time.Second
		for i := range s.Tenants {
			h := make([]float64, api.HistoryLen)
			copy(h[len(h)-up:], s.Tenants[i].History[len(h)-up:])
			s.Tenants[i].History = h
		}
		in.add(&s)
		if strings.Contains(in.line, "new load") || in.alert {
			t.Fatalf("%d s after the restart: %q", up, in.line)
		}
	}
}

// TestVictimsByName: the victims are listed with p95 now and before,
// share of RU, and the routes hurt.
func TestVictimsByName(t *testing.T) {
	var in summary
	for i := range 46 {
		s := incidentAt(i)
		if i == 45 {
			s.Tenants[3].Routes = []api.RouteRow{{Route: "GET /ok", P95Seconds: 0.02}, {Route: "GET /search", P95Seconds: 0.09}}
		}
		in.add(&s)
	}
	vs := in.head.Victims
	if len(vs) != 20 {
		t.Fatalf("%d victims: %+v", len(vs), vs)
	}
	var t02 Victim
	for _, v := range vs {
		if v.Tenant == "t02" {
			t02 = v
		}
	}
	want := Victim{Tenant: "t02", P95Seconds: 0.041, BaselineP95Seconds: 0.020, Share: 0.01, BaselineShare: 10.0 / 201,
		Routes: []RouteHurt{{Route: "GET /search", P95Seconds: 0.09}}, BaselineFrom: "qtop", Since: t0.Add(40 * time.Second)}
	if got, _ := json.Marshal(t02); string(got) != string(must(json.Marshal(want))) {
		t.Fatalf("t02:\n got %s\nwant %s", got, must(json.Marshal(want)))
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestHeadlineUsesCollectorBaselines: a snapshot that carries baselines
// names its victims at once (one snapshot, as qtop --once sees it).
func TestHeadlineUsesCollectorBaselines(t *testing.T) {
	var in summary
	s := withBaselines(incident())
	in.add(&s)
	if len(in.head.Victims) != 2 || in.head.Victims[0].Tenant != "globex" || in.head.Victims[0].BaselineFrom != "collector" {
		t.Fatalf("%+v", in.head.Victims)
	}
	var buf bytes.Buffer
	if err := Print(&buf, s, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Tenants  []api.TenantRow `json:"tenants"`
		Headline Headline        `json:"headline"`
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Tenants) != len(s.Tenants) || len(out.Headline.Victims) != 2 || out.Headline.Victims[1].Tenant != "acme" {
		t.Fatalf("--once json: %s", buf.Bytes())
	}
}

// withBaselines gives acme and globex (p95 0.128 s, 0.123 s) baselines
// of 40 ms and 30 ms, trust-safety its own p95.
func withBaselines(s api.Snapshot) api.Snapshot {
	s.Tenants = slices.Clone(s.Tenants)
	for i := range s.Tenants {
		r := &s.Tenants[i]
		switch r.Tenant {
		case "acme":
			r.BaselineP95Seconds, r.BaselineShare = 0.040, 0.10
			r.Routes = []api.RouteRow{{Route: "GET /cart", P95Seconds: 0.210}, {Route: "GET /health", P95Seconds: 0.002}}
		case "globex":
			r.BaselineP95Seconds, r.BaselineShare = 0.030, 0.05
		case "trust-safety":
			r.BaselineP95Seconds, r.BaselineShare = 0.123, 0.002
		}
	}
	return s
}

// TestGoldenVictims: the Victims page (key 8) at 80×24 and 200×50.
func TestGoldenVictims(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			src := newFake(Features{Throttle: true})
			defer src.Close()
			src.snaps <- withBaselines(incident())
			m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC), WithUser("alice"))
			tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(size[0], size[1]))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("bigcorp")) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
			tm.Send(keyOf("8"))
			tm.Send(tea.QuitMsg{})
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
			teatest.RequireEqualOutput(t, []byte(fm.View()+"\n"))
		})
	}
}

// TestHeadlinePostgresConstantLoadAtStart: qtop --postgres started on a
// load that has been constant: its history's padding is no idle past, so
// nothing is "new load" or "×N its baseline".
func TestHeadlinePostgresConstantLoadAtStart(t *testing.T) {
	var in summary
	for i := range 30 {
		s := api.Snapshot{Source: api.SourcePostgres, Measure: api.MeasureDB}
		h := make([]float64, api.HistoryLen)
		for j := api.HistoryLen - 1 - i; j < api.HistoryLen; j++ {
			h[j] = 3
		}
		s.Tenants = []api.TenantRow{{Tenant: "bigcorp", DBLoad: 3, Share: 0.75, History: h}, {Tenant: "acme", DBLoad: 1, Share: 0.25, History: h}}
		in.add(&s)
		if in.alert {
			t.Fatalf("sample %d: %q", i, in.line)
		}
	}
}

// TestRouteName: the load of processes that record no route (a gate) is
// named in the victims' and a tenant's routes, not left blank.
func TestRouteName(t *testing.T) {
	for in, want := range map[string]string{"": "(no route tag)", "GET /x": "GET /x"} {
		if got := routeName(in); got != want {
			t.Errorf("routeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVictimsNoneSaysWhy: a collector that samples PostgreSQL (and so can
// cancel and terminate) has its processes' latency: with no victims the
// page says none, not that PostgreSQL alone knows no latency, which is
// what qtop --postgres (and its replay) says.
func TestVictimsNoneSaysWhy(t *testing.T) {
	pg := incident()
	pg.Source, pg.Measure = api.SourcePostgres, api.MeasureDB
	for _, c := range []struct {
		name  string
		feats Features
		snap  api.Snapshot
		want  string
	}{
		{"collector sampling PostgreSQL", Features{Throttle: true, Signal: true}, incident(), "none: no tenant's p95 is above its baseline"},
		{"postgres", Features{Signal: true, Group: true}, pg, "n/a: PostgreSQL alone knows no latency"},
		{"replay of postgres", Features{}, pg, "n/a: PostgreSQL alone knows no latency"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := newFake(c.feats)
			defer src.Close()
			src.snaps <- c.snap
			m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC), WithUser("alice"))
			tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(200, 50))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("bigcorp")) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
			tm.Send(keyOf("8"))
			tm.Send(tea.QuitMsg{})
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
			if v := fm.View(); !strings.Contains(v, c.want) {
				t.Fatalf("victims page lacks %q:\n%s", c.want, v)
			}
		})
	}
}
