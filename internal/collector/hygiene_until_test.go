package collector

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// TestHygieneFreshnessOverrideBounds: a forced freshness batch ends
// within --max-rule-ttl and not in the past, and a rule's ages are at
// most a day; a force_until sent back as the policy holds it (a batch
// change after the force ran out) is not refused.
func TestHygieneFreshnessOverrideBounds(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxRuleTTL = time.Hour })
	defer f.stop()
	h := f.s.Handler()
	set := func(maxAge float64, force bool, until time.Time) *httpResult {
		b, _ := json.Marshal(policy.Freshness{Rules: []policy.FreshnessRule{{ID: "push", Cause: policy.CausePush, MaxAgeSeconds: maxAge}},
			Batch: 1, Force: force, ForceUntil: until})
		w := hygieneDo(h, http.MethodPost, api.PathFreshnessPolicy, f.token, strings.NewReader(string(b)))
		return &httpResult{w.Code, w.Body.String()}
	}
	now := f.clk.Now()
	for _, c := range []struct {
		name   string
		maxAge float64
		force  bool
		until  time.Time
		code   int
		want   string
	}{
		{"year 9999", 60, true, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), 400, "more than 1h0m0s ahead (the collector's --max-rule-ttl)"},
		{"past", 60, true, now.Add(-time.Minute), 400, "has already passed"},
		{"now", 60, true, now, 400, "has already passed"},
		{"max age 1e308", 1e308, false, time.Time{}, 400, "max_age_seconds 1e+308, at most 86400"},
		{"max age a day and a second", 86401, false, time.Time{}, 400, "at most 86400"},
		{"a day, not forced", 86400, false, time.Time{}, 200, ""},
		{"forced within the ttl", 60, true, now.Add(time.Hour), 200, ""},
	} {
		r := set(c.maxAge, c.force, c.until)
		if r.code != c.code || !strings.Contains(r.body, c.want) {
			t.Errorf("%s: %d %s, want %d %q", c.name, r.code, r.body, c.code, c.want)
		}
	}
	// The force runs out; the same force_until sent again with the batch
	// is what a client that read the policy sends.
	f.clk.Add(2 * time.Hour)
	if r := set(120, true, now.Add(time.Hour)); r.code != 200 {
		t.Errorf("force_until sent back as held: %d %s", r.code, r.body)
	}
	if r := set(120, true, now.Add(30*time.Minute)); r.code != 400 || !strings.Contains(r.body, "has already passed") {
		t.Errorf("a new force_until in the past: %d %s", r.code, r.body)
	}
}

type httpResult struct {
	code int
	body string
}

// TestHygieneBudgetExpiryBounds: an operator's budget or runaway rule
// that expires does so within --max-rule-ttl and not in the past; one
// without an expiry stays allowed.
func TestHygieneBudgetExpiryBounds(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxRuleTTL = time.Hour })
	defer f.stop()
	h := f.s.Handler()
	now := f.clk.Now()
	budget := func(expires string) string {
		return `{"id":"b1","match":[{"tenant":"acme"}],"share":0.5,"reason":"x"` + expires + `}`
	}
	runaway := func(expires string) string {
		return `{"id":"r1","match":[{"tenant":"acme"}],"after_seconds":60,"action":"report","reason":"x"` + expires + `}`
	}
	at := func(t time.Time) string { return `,"expires":"` + t.Format(time.RFC3339) + `"` }
	for _, c := range []struct {
		path, body string
		code       int
		want       string
	}{
		{PathBudgets, budget(`,"expires":"9999-01-01T00:00:00Z"`), 400, "budget expires 9999-01-01 00:00:00 +0000 UTC is more than 1h0m0s ahead (the collector's --max-rule-ttl)"},
		{PathBudgets, budget(at(now.Add(-time.Second))), 400, "has already passed"},
		{PathBudgets, budget(at(now.Add(time.Hour))), 200, ""},
		{PathBudgets, budget(""), 200, ""},
		{PathRunaway, runaway(`,"expires":"9999-01-01T00:00:00Z"`), 400, "--max-rule-ttl"},
		{PathRunaway, runaway(at(now.Add(-time.Second))), 400, "has already passed"},
		{PathRunaway, runaway(at(now.Add(30 * time.Minute))), 200, ""},
		{PathRunaway, runaway(""), 200, ""},
	} {
		w := hygieneDo(h, http.MethodPost, c.path, f.token, strings.NewReader(c.body))
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("POST %s %s: %d %s, want %d %q", c.path, c.body, w.Code, w.Body, c.code, c.want)
		}
	}
}
