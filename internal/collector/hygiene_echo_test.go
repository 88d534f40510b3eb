package collector

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/api"
)

// TestHygieneErrorEchoes: an error quotes at most maxEcho bytes of a
// value the request sent.
func TestHygieneErrorEchoes(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	long := strings.Repeat("z", 100<<10)
	for _, target := range []string{
		api.PathReport + "?by=" + long,
		api.PathReport + "?measure=" + long,
		api.PathReport + "?format=" + long,
		api.PathReport + "?cost=" + long,
		api.PathReport + "?from=" + long,
		api.PathLive + "?by=" + long,
		api.PathLive + "?n=" + long,
		api.PathLive + "?scope=" + long,
		api.PathHistory + "?tenant=acme&minutes=" + long,
		api.PathAudit + "?from=" + long,
		api.PathAudit + "?limit=" + long,
	} {
		w := hygieneDo(h, http.MethodGet, target, f.token, nil)
		name := target[:strings.IndexByte(target, '=')+1] + "<100 KB>"
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, w.Code)
		}
		if n := w.Body.Len(); n > 1024 || !strings.Contains(w.Body.String(), strings.Repeat("z", maxEcho)+"…") {
			t.Errorf("%s: an answer of %d bytes: %.200s", name, n, w.Body)
		}
	}
	if got := clip(strings.Repeat("é", 40)); got != strings.Repeat("é", 32)+"…" {
		t.Errorf("clip cuts a character: %q", got)
	}
}

// TestHygieneReportCurrency: a currency is 1 to 16 letters or currency
// signs.
func TestHygieneReportCurrency(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	for cur, code := range map[string]int{
		"USD": 200, "eur": 200, "€": 200, "Kč": 200,
		strings.Repeat("A", 16):      200,
		strings.Repeat("A", 17):      400,
		strings.Repeat("A", 100<<10): 400,
		"US D":                       400,
		"<script>":                   400,
		"\x1b[2J":                    400,
	} {
		w := hygieneDo(h, http.MethodGet, api.PathReport+"?cost=100&currency="+url.QueryEscape(cur), f.token, nil)
		if w.Code != code {
			t.Errorf("currency %.20q: %d %s, want %d", cur, w.Code, w.Body, code)
		}
		if code == 400 && !strings.Contains(w.Body.String(), "letters or currency signs") {
			t.Errorf("currency %.20q: the answer does not say what is allowed: %s", cur, w.Body)
		}
	}
}

// TestHygieneAuditErrorsNameAudit: an audit request's errors say audit,
// not report.
func TestHygieneAuditErrorsNameAudit(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	for _, q := range []string{"from=yesterday", "to=soon", "from=1h&to=2h", "limit=0"} {
		w := hygieneDo(h, http.MethodGet, api.PathAudit+"?"+q, f.token, nil)
		msg := w.Body.String()
		if w.Code != http.StatusBadRequest || !strings.Contains(msg, "invalid audit request") || strings.Contains(msg, "report") {
			t.Errorf("%s: %d %s", q, w.Code, msg)
		}
	}
}

// TestHygieneLiveScope: /v1/live takes no scope or scope=local, and
// refuses any other naming the valid one.
func TestHygieneLiveScope(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	for _, q := range []string{"", "?scope=local"} {
		if w := hygieneDo(h, http.MethodGet, api.PathLive+q, f.token, nil); w.Code != http.StatusOK {
			t.Errorf("%q: %d %s", q, w.Code, w.Body)
		}
	}
	for _, q := range []string{"?scope=zzz", "?scope=LOCAL", "?scope=fleet"} {
		w := hygieneDo(h, http.MethodGet, api.PathLive+q, f.token, nil)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "want local") {
			t.Errorf("%q: %d %s", q, w.Code, w.Body)
		}
	}
}
