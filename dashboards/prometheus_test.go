package dashboards_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/qtop-dev/qtop/dashboards"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestPrometheus runs a real Prometheus (from the same Debian package as
// promtool) that scrapes a real collector running its demo fleet and an
// application process behind the enforcement middleware, and loads the
// rule file. It checks that every rule evaluates without error on real
// series, that the per-tenant recording rules produce series from the
// scraped data, and that every dashboard query (Grafana variables
// substituted) is accepted and evaluated by Prometheus.
func TestPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if testsvc.Required() {
			t.Fatalf("prometheus not found (%v); scripts/test installs Debian's prometheus package", err)
		}
		t.Skipf("prometheus not found (%v); install Debian's prometheus package or run scripts/test", err)
	}
	dir := t.TempDir()

	// The collector with its demo fleet, on the embedded store.
	col, err := collector.New(collector.Config{
		Listen: "127.0.0.1:0", Store: "duckdb://" + filepath.Join(dir, "qtop.duckdb"),
		DataDir: filepath.Join(dir, "data"), Writer: "prom", Token: "prom", ReadToken: "prom-read", Demo: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := col.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := col.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	}()

	// An application process: enforcement metrics on its own registry.
	reg := prometheus.NewRegistry()
	enf, err := enforce.New()
	if err != nil {
		t.Fatal(err)
	}
	em, err := enforce.NewMetrics(reg, enf, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := enforce.NewMiddleware(enf, enforce.WithMetrics(em), enforce.WithHeaderTenant("X-Tenant", "X-Tier"))
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	traffic := func() {
		for i, tn := range []string{"acme", "acme", "bigco", "small"} {
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			req.Header.Set("X-Tenant", tn)
			req.Header.Set("X-Tier", fmt.Sprintf("T%d", 1+i%3))
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	traffic()
	appSrv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer appSrv.Close()

	// Prometheus, scraping both every second and evaluating the rules.
	rules, err := filepath.Abs(dashboards.RulesFile)
	if err != nil {
		t.Fatal(err)
	}
	// The collector's /metrics takes the read token, from a file as the
	// scrape config of dashboards/README.md has it.
	tokenFile := filepath.Join(dir, "read.token")
	if err := os.WriteFile(tokenFile, []byte("prom-read"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: qtop-collector
    authorization: {credentials_file: %q}
    static_configs: [{targets: [%q]}]
  - job_name: checkout
    static_configs: [{targets: [%q]}]
`, rules, tokenFile, col.Addr(), strings.TrimPrefix(appSrv.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", tail(logs.String(), 4000))
		}
	}()
	api := "http://" + addr + "/api/v1/"

	// Wait (bounded) until the rules have produced per-tenant series
	// from the scraped data: the pipeline works end to end.
	deadline := time.Now().Add(90 * time.Second)
	var got []map[string]string
	if !testsvc.PollEvery(time.Until(deadline), 500*time.Millisecond, func() bool {
		traffic()
		got, err = instant(api, "qtop:tenant_db_seconds:rate5m")
		return err == nil && len(got) > 0
	}) {
		t.Fatalf("no qtop:tenant_db_seconds:rate5m series from Prometheus after 90 s (last error %v)", err)
	}
	var tenants []string
	for _, l := range got {
		tenants = append(tenants, l["tenant"])
	}
	sort.Strings(tenants)
	t.Logf("qtop:tenant_db_seconds:rate5m tenants: %q", tenants)
	if !slices.Contains(tenants, "other") && len(tenants) < 2 {
		t.Errorf("per-tenant recording rule: tenants %q", tenants)
	}

	// Every rule is healthy (evaluated without error) once each has been
	// evaluated on the data.
	var rs struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	unknown := 0
	if !testsvc.PollEvery(time.Until(deadline), 200*time.Millisecond, func() bool {
		if err := getJSON(api+"rules", &rs); err != nil {
			t.Fatal(err)
		}
		unknown = 0
		for _, g := range rs.Data.Groups {
			for _, r := range g.Rules {
				if r.Health == "unknown" {
					unknown++
				}
			}
		}
		return unknown == 0
	}) {
		t.Fatalf("%d rules never evaluated", unknown)
	}
	n := 0
	for _, g := range rs.Data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("rule %s/%s: health %q, error %q", g.Name, r.Name, r.Health, r.LastError)
			}
		}
	}
	if want := len(loadRules(t)); n != want {
		t.Errorf("Prometheus loaded %d rules, the file holds %d", n, want)
	}

	// Every dashboard query is valid PromQL for Prometheus itself.
	for _, d := range loadDashboards(t) {
		vars := dashboardVars(d)
		for _, ref := range dashboardRefs(t, d) {
			q := substitute(ref.Expr, vars)
			if _, err := instant(api, q); err != nil {
				t.Errorf("%s: %q: %v", ref.Where, q, err)
			}
		}
	}
	// Queries of each scraped job return data (once a rate has two
	// scrapes to work with).
	for _, q := range []string{
		`sum by (tier) (rate(qtop_enforce_ru_total{job="checkout"}[1m]))`,
		`qtop:collector_reports:rate5m`,
		`qtop_collector_spool_bytes`,
		`qtop_collector_latency_ratio{service!=""}`,
	} {
		var res []map[string]string
		var err error
		if !testsvc.PollEvery(time.Until(deadline), 200*time.Millisecond, func() bool {
			if res, err = instant(api, q); err == nil && len(res) > 0 {
				return true
			}
			traffic()
			return false
		}) {
			t.Errorf("%s: %d series, %v", q, len(res), err)
		}
	}

	// The per-tenant counters do not reset while the demo's tenants take
	// turns at the top (they did: six resets a minute), and the distinct
	// tenant label values stay within the collector's stated bound (80 an
	// hour, plus "other"). A minute of scrapes at 1 s is enough to see
	// the churn.
	var minute []map[string]string
	if !testsvc.PollEvery(100*time.Second, time.Second, func() bool {
		traffic()
		minute, err = instant(api, `max(count_over_time(qtop_collector_tenant_ru_total{tenant="other"}[2m])) >= 60`)
		return err == nil && len(minute) > 0
	}) {
		t.Fatalf("no minute of per-tenant series: %v %v", minute, err)
	}
	if res, err := instant(api, `sum(resets(qtop_collector_tenant_ru_total[2m])) > 0`); err != nil || len(res) > 0 {
		t.Errorf("per-tenant counters reset: %v %v", res, err)
	}
	if res, err := instant(api, `count(count by (tenant) (count_over_time(qtop_collector_tenant_ru_total[2m]))) > 81`); err != nil || len(res) > 0 {
		t.Errorf("more distinct tenant values than the bound: %v %v", res, err)
	}
}

// dashboardVars returns a value for each of a dashboard's variables as a
// user would see them: query variables at All (".*"), custom and textbox
// variables at their current value.
func dashboardVars(d Dashboard) map[string]string {
	vars := map[string]string{"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}
	for _, v := range variables(d.JSON) {
		name, _ := v["name"].(string)
		switch v["type"] {
		case "query":
			vars[name] = ".*"
		case "custom":
			cur, _ := v["current"].(map[string]any)
			vars[name], _ = cur["value"].(string)
		case "textbox":
			vars[name], _ = v["query"].(string)
		}
	}
	return vars
}

var varRE = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]|\$([a-zA-Z_][a-zA-Z0-9_]*)`)

func substitute(expr string, vars map[string]string) string {
	return varRE.ReplaceAllStringFunc(expr, func(s string) string {
		m := varRE.FindStringSubmatch(s)
		name := m[1] + m[2] + m[3]
		if v, ok := vars[name]; ok {
			return v
		}
		return s
	})
}

// instant runs an instant query and returns the label sets of the result.
func instant(api, q string) ([]map[string]string, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     json.RawMessage
		} `json:"data"`
	}
	if err := getJSON(api+"query?query="+url.QueryEscape(q), &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, nil
	}
	var vec []struct {
		Metric map[string]string `json:"metric"`
	}
	if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
		return nil, err
	}
	out := make([]map[string]string, len(vec))
	for i, v := range vec {
		out[i] = v.Metric
	}
	return out, nil
}

func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s: %d: %v", u, resp.StatusCode, err)
	}
	return nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
