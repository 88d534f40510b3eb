package collector

import (
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/api"
)

// TestHygieneQueryStrict: the views and the policy endpoints refuse a
// query parameter they do not have, or one given twice, with 400 and the
// names they take, rather than drop it: a tenant= on the live view would
// show every tenant, a dry_run=true on a policy change would apply it.
// Nothing is changed by a refused request.
func TestHygieneQueryStrict(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	rule := `{"tenant":"acme","action":"throttle","ru_per_second":500,"expires":"2026-03-04T09:30:00Z","reason":"import"}`
	for _, c := range []struct {
		method, target, body string
		code                 int
		want                 string
	}{
		{"GET", api.PathLive + "?tenant=acme", "", 400, `unknown parameter "tenant": want by, n, scope`},
		{"GET", api.PathLive + "?by=db&by=ru", "", 400, `parameter "by" given 2 times`},
		{"GET", api.PathStream + "?top=5", "", 400, `unknown parameter "top": want by, n, scope`},
		{"GET", api.PathHistory + "?tenat=acme", "", 400, `unknown parameter "tenat": want tenant, minutes`},
		{"GET", api.PathAudit + "?since=1h", "", 400, `unknown parameter "since": want from, to, limit`},
		{"POST", api.PathPolicy + "?dry_run=true", rule, 400, `unknown parameter "dry_run": want allow_t0`},
		{"GET", api.PathAutopilot + "?verbose=1", "", 400, `unknown parameter "verbose": this endpoint takes none`},
		{"GET", PathBudgets + "?tenant=acme", "", 400, "this endpoint takes none"},
		{"GET", api.PathLive + "?%zz", "", 400, "query does not decode"},
		{"GET", api.PathLive + "?by=db&n=5", "", 200, ""},
		{"GET", api.PathPolicy, "", 200, ""},
	} {
		w := hygieneDo(h, c.method, c.target, f.token, strings.NewReader(c.body))
		if body := strings.ReplaceAll(w.Body.String(), `\"`, `"`); w.Code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want %d %q", c.method, c.target, w.Code, w.Body, c.code, c.want)
		}
	}
	if w := hygieneDo(h, "GET", api.PathPolicy, f.token, nil); strings.Contains(w.Body.String(), "acme") {
		t.Errorf("a refused policy change was applied: %s", w.Body)
	}
}
