package autopilot

import (
	"testing"
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// TestIncidentAppliesRelaxesLifts: the import starts at second 100; the
// quota at bigcorp's frozen baseline (10 RU/s) applies in that second,
// the victims recover the next, the quota relaxes twice a hold apart
// (20, 40 RU/s) and lifts when the import ends and bigcorp's load is
// back near its baseline.
func TestIncidentAppliesRelaxesLifts(t *testing.T) {
	e := newEngine(t, policy.Autopilot{Rules: []policy.AutopilotRule{rule(policy.AutopilotEnforce)}})
	sc := &scenario{start: 100, end: 400, offenders: []string{"bigcorp"}}
	got, ds := run(t, e, sc, 600, true)
	same(t, got, step{100, KindApply, "bigcorp", 10}, step{131, KindRelax, "bigcorp", 20}, step{161, KindRelax, "bigcorp", 40},
		step{400, KindLift, "bigcorp", 40})
	ev := ds[0].Evidence
	if ev.VictimsHurt != 20 || len(ev.Victims) != MaxEvidenceVictims || ev.Factor < 3 || ev.Share < 0.3 || ev.BaselineRU != 10 || ev.BaselineFrom != "own" {
		t.Fatalf("evidence %+v", ev)
	}
	if r := ds[0].PolicyRule; r == nil || r.Action != policy.Quota || r.Shadow || r.CreatedBy != "autopilot/noisy" || r.RUPerSecond != 10 ||
		!r.Expires.Equal(t0.Add(1000*time.Second)) {
		t.Fatalf("rule %+v", ds[0].PolicyRule)
	}
	if l := ds[3].PolicyRule; l.ID != ds[0].PolicyRule.ID || !l.Expires.Equal(t0.Add(400*time.Second)) {
		t.Fatalf("lift %+v", l)
	}
	if len(e.Active()) != 0 {
		t.Fatalf("active %+v", e.Active())
	}
}
