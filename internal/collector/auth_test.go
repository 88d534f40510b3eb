package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/store/duckstore"
	"github.com/qtop-dev/qtop/tenant"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// TestExposedWithoutCredentials: on 0.0.0.0 without --token, anyone could
// post reports (and read everything), and without TLS the tokens travel in
// clear; New refuses unless Insecure.
func TestExposedWithoutCredentials(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.Server(t, "collector")
	files := tlsfiles.ServerFiles{Cert: cert, Key: key}
	base := Config{Listen: "0.0.0.0:0", Store: StoreNone, Registerer: prometheus.NewRegistry()}
	for _, c := range []struct {
		mutate func(*Config)
		ok     bool
	}{
		{func(*Config) {}, false},
		{func(c *Config) { c.Token = "r" }, false},
		{func(c *Config) { c.ReadToken = "x" }, false},
		{func(c *Config) { c.Token, c.ReadToken = "r", "x" }, false},
		{func(c *Config) { c.TLS = files }, false},
		{func(c *Config) { c.Token, c.ReadToken, c.TLS = "r", "x", files }, true},
		{func(c *Config) { c.Insecure = true }, true},
		{func(c *Config) { c.Listen = "127.0.0.1:0" }, true},
		{func(c *Config) { c.Listen = "[::1]:0" }, true},
		{func(c *Config) { c.Listen = ":0" }, false},
	} {
		cfg := base
		cfg.DataDir = t.TempDir()
		cfg.Registerer = prometheus.NewRegistry()
		c.mutate(&cfg)
		s, err := New(cfg)
		if c.ok != (err == nil) {
			t.Errorf("%+v: %v", cfg, err)
		}
		if err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--insecure")) {
			t.Errorf("%s: error %v does not say what to do", cfg.Listen, err)
		}
		if s != nil {
			s.Shutdown(context.Background())
		}
	}
}

// TestThreeCredentials: the report token only reports, the read token
// only reads, the admin token changes policy and reads the audit; the
// generated admin token is kept in a 0600 file and never logged; who
// comes from the credential, not from a header.
func TestThreeCredentials(t *testing.T) {
	var logs bytes.Buffer
	f := newFixture(t, func(c *Config) {
		c.Token, c.ReadToken = "rep-tok", "read-tok"
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	defer f.stop()
	if strings.Contains(logs.String(), f.token) {
		t.Fatal("the generated admin token is in the log")
	}
	st, err := os.Stat(filepath.Join(f.dir, adminTokenFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v %v", st, err)
	}
	h := f.s.Handler()
	p := newProcess(f.clk, "api", "p1")
	do := func(method, path, token string, body []byte) int {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if path == api.PathReports {
			req.Header.Set("Content-Type", "application/vnd.qtop.report")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	rule := func(id string) []byte {
		b, _ := json.Marshal(policy.Rule{ID: id, Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 10,
			Reason: "test", Expires: t0.Add(time.Hour)})
		return b
	}
	reads := []string{api.PathLive, api.PathPolicy, "/metrics", api.PathReport + "?from=1h"}
	for _, c := range []struct {
		token             string
		report, read, adm bool
	}{
		{"rep-tok", true, false, false},
		{"read-tok", false, true, false},
		{f.token, false, true, true},
		{"", false, false, false},
	} {
		f.clk.Add(time.Second)
		if got := do(http.MethodPost, api.PathReports, c.token, p.report(t, "acme", 1, "")) == 200; got != c.report {
			t.Errorf("token %q: report allowed %v, want %v", c.token, got, c.report)
		}
		for _, path := range reads {
			if got := do(http.MethodGet, path, c.token, nil) == 200; got != c.read {
				t.Errorf("token %q: GET %s allowed %v, want %v", c.token, path, got, c.read)
			}
		}
		if got := do(http.MethodPost, api.PathPolicy, c.token, rule("r-"+c.token)) == 200; got != c.adm {
			t.Errorf("token %q: policy change allowed %v, want %v", c.token, got, c.adm)
		}
		if got := do(http.MethodGet, api.PathAudit, c.token, nil) == 200; got != c.adm {
			t.Errorf("token %q: audit allowed %v, want %v", c.token, got, c.adm)
		}
	}
	// who is the credential's, whatever header the client sets.
	req := httptest.NewRequest(http.MethodPost, api.PathPolicy, bytes.NewReader(rule("who")))
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("X-Qtop-User", "mallory")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var pol policy.Policy
	json.Unmarshal(w.Body.Bytes(), &pol)
	for _, r := range pol.Rules {
		if r.ID == "who" && (!strings.HasPrefix(r.CreatedBy, "admin@") || strings.Contains(r.CreatedBy, "mallory")) {
			t.Fatalf("created_by %q, want the credential's name", r.CreatedBy)
		}
	}
	// An OTLP receiver (or any other intake) calls the same helper.
	req = httptest.NewRequest(http.MethodPost, "/v1/traces", nil)
	req.Header.Set("Authorization", "bearer rep-tok")
	if who, err := f.s.Authorize(req, RoleReport); err != nil || who != "report" {
		t.Fatalf("Authorize(report) = %q, %v", who, err)
	}
	if _, err := f.s.Authorize(req, RoleRead); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("report token read: %v", err)
	}
}

// TestRuleSanity: a rule must not outlive the maximum expiry, throttle T0
// without the override, carry an absurd multiplier, or trail data after
// its JSON.
func TestRuleSanity(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	h := f.s.Handler()
	post := func(body string, query string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, api.PathPolicy+query, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	mk := func(r policy.Rule) string {
		r.Reason = "test"
		if r.Expires.IsZero() {
			r.Expires = t0.Add(time.Hour)
		}
		if r.Action == "" {
			r.Action = policy.Throttle
		}
		if r.Action == policy.Throttle && r.RUPerSecond == 0 {
			r.RUPerSecond = 5
		}
		b, _ := json.Marshal(r)
		return string(b)
	}
	for name, c := range map[string]struct {
		body, query, want string
	}{
		"a week":        {mk(policy.Rule{Tenant: "a", Expires: t0.Add(7 * 24 * time.Hour)}), "", "more than 24h0m0s ahead"},
		"T0 throttle":   {mk(policy.Rule{Tier: tenant.T0}), "", "T0 is never shed"},
		"T0 price":      {mk(policy.Rule{Tier: tenant.T0, Action: policy.Price, Multiplier: 2}), "", "T0 is never shed"},
		"multiplier":    {mk(policy.Rule{Tier: tenant.T3, Action: policy.Price, Multiplier: 1e6}), "", "at most 100"},
		"trailing":      {mk(policy.Rule{Tenant: "a"}) + `{"id":"x"}`, "", "data after the JSON"},
		"trailing junk": {mk(policy.Rule{Tenant: "a"}) + `]`, "", "data after the JSON"},
		"rate left out": {`{"tenant":"x","action":"quota","reason":"r","expires":"` + t0.Add(time.Hour).Format(time.RFC3339) + `"}`, "", "a quota rule needs ru_per_second"},
		"tenant twice":  {`{"tenant":"small","reason":"r","action":"throttle","tenant":"bigcorp"}`, "", "tenant\\\" appears twice"},
		"bad override":  {mk(policy.Rule{Tier: tenant.T0}), "?allow_t0=maybe", "allow_t0"},
		"ru per second": {mk(policy.Rule{Tenant: "a", RUPerSecond: 1e12}), "", "at most 1e+09"},
		// Shown as the tenant's rule while the tier was dropped.
		"tenant and tier": {mk(policy.Rule{Tenant: "x", Tier: tenant.T3}), "", "one tenant or for every tenant of a tier, not both"},
		// Said "lifting a rule needs its id" to someone adding a rule.
		"past expiry, no id": {mk(policy.Rule{Tenant: "x", Expires: t0.Add(-time.Hour)}), "", "is not in the future"},
	} {
		code, body := post(c.body, c.query)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", name, code, body, c.want)
		}
	}
	if code, body := post(mk(policy.Rule{Tier: tenant.T0}), "?allow_t0=true"); code != 200 {
		t.Fatalf("T0 with the override: %d %s", code, body)
	}
	if code, body := post(mk(policy.Rule{Tier: tenant.T0, Shadow: true}), ""); code != 200 {
		t.Fatalf("T0 shadow rule: %d %s", code, body)
	}
	// A cap of 0 is taken when it is said, and a lift needs no rate.
	zero := `{"id":"z","tenant":"x","action":"throttle","ru_per_second":0,"reason":"r","expires":"` + t0.Add(time.Hour).Format(time.RFC3339) + `"}`
	if code, body := post(zero, ""); code != 200 {
		t.Fatalf("a cap of 0, said: %d %s", code, body)
	}
	lift := `{"id":"z","tenant":"x","action":"throttle","reason":"r","expires":"` + t0.Format(time.RFC3339) + `"}`
	if code, body := post(lift, ""); code != 200 {
		t.Fatalf("a lift without a rate: %d %s", code, body)
	}
}

// TestAuditOnBothStores: GET /v1/audit reads the policy changes back,
// expiries included, from DuckDB and from ClickHouse.
func TestAuditOnBothStores(t *testing.T) {
	for _, name := range []string{"duckdb", "clickhouse"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var url string
			var open func() store.Store
			switch name {
			case "duckdb":
				path := filepath.Join(dir, "qtop.duckdb")
				url = "duckdb://" + path
				open = func() store.Store {
					st, err := duckstore.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					return st
				}
			default:
				addr := testsvc.ClickHouse(t)
				waitClickHouse(t, addr)
				db := fmt.Sprintf("qtop_col_audit_%d", time.Now().UnixNano())
				url = "clickhouse://" + addr + "/" + db
				open = func() store.Store {
					st, err := chstore.Open(context.Background(), addr, db)
					if err != nil {
						t.Fatal(err)
					}
					return st
				}
			}
			clk := &clock{t: t0}
			s, err := New(Config{Store: url, DataDir: filepath.Join(dir, "data"), Writer: "w1", Registerer: prometheus.NewRegistry(), Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			rule := policy.Rule{ID: "imp", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 5, Reason: "import", Expires: t0.Add(2 * time.Hour)}
			if _, err := s.SetRule(context.Background(), rule, "admin@test"); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Minute)
			rule.Expires = clk.Now().Add(-time.Second)
			if _, err := s.SetRule(context.Background(), rule, "admin@test"); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s.Handler())
			c, _ := api.NewClient(srv.URL)
			if _, err := c.Audit(context.Background(), t0.Add(-time.Hour), t0.Add(time.Hour), "wrong"); !errors.Is(err, api.ErrUnauthorized) {
				t.Errorf("audit with a wrong token: %v", err)
			}
			rows, err := c.Audit(context.Background(), t0.Add(-time.Hour), t0.Add(time.Hour), s.Token())
			srv.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 || rows[0].Action != "add" || rows[1].Action != "lift" || !strings.Contains(string(rows[0].Rule), `"expires":"2026-03-04T11:00:10Z"`) {
				t.Fatalf("audit rows %+v", rows)
			}
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := open()
			defer st.Close()
			direct, err := ReadAudit(context.Background(), st, t0.Add(-time.Hour), t0.Add(time.Hour))
			if err != nil || len(direct) != 2 {
				t.Fatalf("audit read from the store: %v %+v", err, direct)
			}
		})
	}
}

// TestCertExpiryMetric: the collector exports when the certificate it
// serves expires, for QtopCollectorCertExpiring.
func TestCertExpiryMetric(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	notAfter := time.Now().Add(10 * 24 * time.Hour).Truncate(time.Second)
	cert, key := ca.ServerValid(t, "collector", time.Now().Add(-time.Hour), notAfter)
	reg := prometheus.NewRegistry()
	s, err := New(Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Registerer: reg,
		TLSConfig: TLSConfig{TLS: tlsfiles.ServerFiles{Cert: cert, Key: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	got, err := testutil.GatherAndCount(reg, "qtop_collector_tls_cert_expiry_timestamp_seconds")
	if err != nil || got != 1 {
		t.Fatalf("series %d, %v", got, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "qtop_collector_tls_cert_expiry_timestamp_seconds" {
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != float64(notAfter.Unix()) {
				t.Fatalf("expiry %v, want %v", v, notAfter.Unix())
			}
		}
	}
}

// TestBadListenBeforeAnything: a listen address with an impossible port
// (the HTTP port, OTLP/gRPC's, the rate-limit service's) is refused before
// the data directory is made (a trial's --listen 127.0.0.1:99999 made the
// directory, an admin token and the store's tables, then failed; then
// --rls-listen did).
func TestBadListenBeforeAnything(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, l := range []string{"127.0.0.1:99999", "127.0.0.1:http-alt", "127.0.0.1:-1"} {
		_, err := New(Config{Listen: l, DataDir: dir, Registerer: prometheus.NewRegistry()})
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "want a number from 0 to 65535") {
			t.Errorf("listen %q: %v", l, err)
		}
		for _, c := range []Config{{OTLPConfig: OTLPConfig{OTLPGRPC: l}}, {QuotaConfig: QuotaConfig{RLSConfig: RLSConfig{RLSListen: l}}}} {
			c.Listen, c.DataDir, c.Registerer = "127.0.0.1:0", dir, prometheus.NewRegistry()
			if _, err := New(c); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "want a number from 0 to 65535") {
				t.Errorf("otlp grpc %q, rls %q: %v", c.OTLPGRPC, c.RLSListen, err)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("listen %q: the data directory was made (%v)", l, err)
		}
	}
}
