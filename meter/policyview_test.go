package meter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
)

// TestPolicyView: a reply's view is applied on a newer version or another
// tag, its tag is then announced in the next report, an "unchanged" view
// and an older version change nothing, and a malformed view is refused.
func TestPolicyView(t *testing.T) {
	var got []policy.Policy
	r := &Reporter{cfg: config{onPolicy: func(p policy.Policy) { got = append(got, p) }}}
	view := func(js string) {
		t.Helper()
		reply := report.Reply{Accepted: true, PolicyView: json.RawMessage(js)}
		pol, tag, _, err := replyParts(reply)
		if err != nil {
			t.Fatal(err)
		}
		r.applyView(pol, tag)
	}
	rule := `{"id":"r1","tenant":"acme","action":"throttle","ru_per_second":10,"expires":"2099-01-01T00:00:00Z","reason":"x","created":"2026-01-01T00:00:00Z"}`
	steps := []struct {
		js      string
		applied int
		tag     string
	}{
		{`{"version":3,"tag":"a","rules":[` + rule + `]}`, 1, "a"},
		{`{"version":3,"tag":"a","unchanged":true}`, 1, "a"},
		{`{"version":3,"tag":"b"}`, 2, "b"}, // another tenant's part at the same version
		{`{"version":2,"tag":"c"}`, 2, "b"}, // a collector behind
		{`{"version":4,"tag":"d"}`, 3, "d"},
	}
	for i, st := range steps {
		view(st.js)
		if len(got) != st.applied || r.heldView().Tag != st.tag {
			t.Fatalf("step %d: %d applied, tag %q; want %d and %q", i, len(got), r.heldView().Tag, st.applied, st.tag)
		}
	}
	if len(got[0].Rules) != 1 || got[0].Rules[0].Tenant != "acme" || got[0].Version != 3 {
		t.Fatalf("first policy %+v", got[0])
	}
	for _, bad := range []string{`{"version":`, `{"version":5,"tag":"` + strings.Repeat("x", 100) + `"}`,
		`{"version":5,"rules":[{"id":"x","action":"throttle"}]}`} {
		if _, _, _, err := replyParts(report.Reply{PolicyView: json.RawMessage(bad)}); !errors.Is(err, report.ErrMalformed) {
			t.Errorf("%.40s: %v", bad, err)
		}
	}
}
