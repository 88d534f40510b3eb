package collector

import (
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// Only agents and gates apply the policy: with OTLP services alone the
// note says no process applies it; sources idle for longer than
// appliedByWindow do not count.
func TestAppliedBy(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	in := newIntake(Config{IntakeConfig: IntakeConfig{MaxSources: 100}})
	add := func(s report.Source, at time.Time) {
		src := in.source(sourceKey(s), at)
		src.last = at
	}
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
