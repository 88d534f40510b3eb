package collector

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// Only agents and gates apply the policy: with OTLP services alone the
// note says no process applies it; sources idle for longer than
// appliedByWindow, or only replayed from the log, do not count.
func TestAppliedBy(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	in := newIntake(Config{IntakeConfig: IntakeConfig{MaxSources: 100}})
	add := func(s report.Source, at time.Time) {
		src := in.source(sourceKey(s), at)
		src.last, src.heard = at, at
	}
	// A process replayed from the write-ahead log after a restart (gone
	// since, or back under a new instance): kept, not counted.
	in.source(sourceKey(report.Source{Service: "billing", Instance: "before-restart"}), now).last = now
	add(report.Source{Service: "shop-node", Instance: "a~otlp-1"}, now)
	add(report.Source{Service: "shop-node", Instance: "b~otlp-1"}, now)
	add(report.Source{Service: "shop-go", Instance: "~otlp-1"}, now)
	add(report.Source{Service: "old", Instance: "x"}, now.Add(-3*time.Minute)) // an agent gone idle
	a := in.appliedBy(now)
	if want := (api.AppliedBy{OTLPServices: 2}); a != want {
		t.Fatalf("applied by %+v, want %+v", a, want)
	}
	if n := a.Note(); n != "no process applies this (2 OTLP services, 0 agents, 0 gates)" {
		t.Errorf("note %q", n)
	}
	add(report.Source{Service: "billing", Instance: "i-1"}, now)
	add(report.Source{Service: "edge", Instance: "g" + report.GateInstanceMark + "1"}, now)
	a = in.appliedBy(now)
	if want := (api.AppliedBy{OTLPServices: 2, Agents: 1, Gates: 1}); a != want || a.Note() != "" {
		t.Errorf("applied by %+v (note %q), want %+v and no note", a, a.Note(), want)
	}
}

// GET /v1/policy carries applied_by and, while only OTLP services report,
// the note; the policy's own fields stay at the top level.
func TestPolicyAppliedByHTTP(t *testing.T) {
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	s, err := New(Config{Store: StoreNone, DataDir: t.TempDir(), Now: func() time.Time { return now }, Token: "tok", AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	send := func(src report.Source, sections ...report.Section) {
		rep := &report.Report{Source: src, Seq: 1, Start: now.Add(-time.Second), End: now,
			Rows: []report.Row{{Tenant: "acme", Route: "/a", Kind: report.KindRequest, Count: 1, Duration: time.Millisecond}}}
		for _, sec := range sections {
			rep.SetSection(sec)
		}
		if _, err := s.Consume(context.Background(), rep, nil); err != nil {
			t.Fatal(err)
		}
	}
	get := func() api.PolicyStatus {
		req := httptest.NewRequest(http.MethodGet, api.PathPolicy, nil)
		req.Header.Set("Authorization", "Bearer tok")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", api.PathPolicy, w.Code, w.Body)
		}
		var ps api.PolicyStatus
		if err := json.Unmarshal(w.Body.Bytes(), &ps); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(w.Body.String(), `"version":`) {
			t.Errorf("the policy's fields left the top level: %s", w.Body)
		}
		return ps
	}
	send(report.Source{Service: "shop-node", Instance: "n1" + report.OTLPInstanceMark + "abc"})
	ps := get()
	if ps.AppliedBy != (api.AppliedBy{OTLPServices: 1}) || ps.Note != "no process applies this (1 OTLP services, 0 agents, 0 gates)" {
		t.Errorf("with one OTLP service: %+v %q", ps.AppliedBy, ps.Note)
	}
	send(report.Source{Service: "billing", Instance: "b1"})
	if ps = get(); ps.AppliedBy != (api.AppliedBy{OTLPServices: 1, Agents: 1}) || ps.Note != "" {
		t.Errorf("with an agent: %+v %q", ps.AppliedBy, ps.Note)
	}
	// A database budget, and no agent applies budgets: said so.
	if _, err := s.SetBudget(context.Background(), policy.Budget{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Reason: "reports", Mode: policy.Enforce}, false, "test"); err != nil {
		t.Fatal(err)
	}
	if ps = get(); ps.Note != "no process applies the database budgets (1 agents, none with budgets: agent.WithBudgets)" {
		t.Errorf("a budget no agent applies: %+v %q", ps.AppliedBy, ps.Note)
	}
	// An agent whose wrapper has budgets says so with an empty window.
	send(report.Source{Service: "billing", Instance: "b2"}, budget.Window{})
	if ps = get(); ps.AppliedBy != (api.AppliedBy{OTLPServices: 1, Agents: 2, Budgets: 1}) || ps.Note != "" {
		t.Errorf("with an agent applying budgets: %+v %q", ps.AppliedBy, ps.Note)
	}
}

// A service counts as behind a gate for gatedWindow after a gate of it
// reported (not a replayed report, not an agent's or OTLP's).
func TestGatedNow(t *testing.T) {
	in := newIntake(Config{})
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, inst := range []string{"h1", "h1" + report.OTLPInstanceMark + "c1"} {
		in.accepted(&source{}, &report.Report{Source: report.Source{Service: "shop-node", Instance: inst}}, now)
	}
	in.accepted(&source{}, nil, now) // replayed
	if in.gatedNow("shop-node", now) {
		t.Fatal("gated by an agent or OTLP")
	}
	in.accepted(&source{}, &report.Report{Source: report.Source{Service: "shop-node", Instance: "h1" + report.GateInstanceMark + "g1"}}, now)
	if !in.gatedNow("shop-node", now.Add(gatedWindow)) || in.gatedNow("api", now) {
		t.Fatal("a gate's report did not gate its service alone")
	}
	if in.gatedNow("shop-node", now.Add(gatedWindow+time.Nanosecond)) {
		t.Fatal("still gated after the window")
	}
}
