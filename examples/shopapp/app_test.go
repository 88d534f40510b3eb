package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/tenant"
)

func newTestApp(t *testing.T) (*App, *sql.DB, string) {
	t.Helper()
	dsn := testsvc.Postgres(t)
	schema := "shopapp_test_" + suffix(t)
	plain, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), Config{Postgres: dsn, Schema: schema, Service: "shopapp-test", ReportSleep: time.Millisecond})
	if err != nil {
		plain.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if _, err := plain.Exec("DROP SCHEMA IF EXISTS " + pgx.Identifier{schema}.Sanitize() + " CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		plain.Close()
	})
	return a, plain, schema
}

func serve(h http.Handler, method, target, tenantName, tier string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	if tenantName != "" {
		r.Header.Set(HeaderTenant, tenantName)
	}
	if tier != "" {
		r.Header.Set(HeaderTier, tier)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The routes on the real PostgreSQL, and bad input: each bad request gets
// 400 with a reason, changes nothing, and leaves the app serving.
func TestRoutesAndBadInput(t *testing.T) {
	a, plain, schema := newTestApp(t)
	h := a.Handler()

	bad := []struct {
		name, method, target, tenant, tier, want string
	}{
		{"no tenant", "POST", "/catalog/import?n=5", "", "", "request has no tenant"},
		{"bad tier", "POST", "/catalog/import?n=5", "acme", "T9", "want T0, T1, T2 or T3"},
		{"unprintable tenant", "POST", "/catalog/import?n=5", "ac\x01me", "", "bad tenant"},
		{"tenant too long", "POST", "/catalog/import?n=5", strings.Repeat("a", tenant.MaxTenantLen+1), "", "at most"},
		{"import n not a number", "POST", "/catalog/import?n=lots", "acme", "", "n=\"lots\""},
		{"import n too large", "POST", "/catalog/import?n=5001", "acme", "", "from 1 to 5000"},
		{"import n zero", "POST", "/catalog/import?n=0", "acme", "", "from 1 to 5000"},
		{"limit too large", "GET", "/products?limit=101", "acme", "", "from 1 to 100"},
	}
	for _, c := range bad {
		w := serve(h, c.method, c.target, c.tenant, c.tier)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d %q, want 400 with %q", c.name, w.Code, w.Body.String(), c.want)
		}
	}
	var n int
	if err := plain.QueryRow("SELECT count(*) FROM " + pgx.Identifier{schema, "products"}.Sanitize()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after bad requests: %d, %v; want 0", n, err)
	}

	if w := serve(h, "POST", "/catalog/import?n=3", "acme", "T1"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"imported":3`) {
		t.Fatalf("import: %d %s", w.Code, w.Body.String())
	}
	w := serve(h, "GET", "/products?limit=2", "acme", "")
	var got []product
	if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || len(got) != 2 || got[0].ID <= got[1].ID {
		t.Fatalf("products: %d %s (%v)", w.Code, w.Body.String(), err)
	}
	if w := serve(h, "GET", "/products", "globex", ""); w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "[]" {
		t.Errorf("another tenant's products: %d %s, want []", w.Code, w.Body.String())
	}
	if w := serve(h, "GET", "/reports", "acme", "T3"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"products":3`) {
		t.Errorf("report: %d %s", w.Code, w.Body.String())
	}
	if w := serve(h, "GET", "/healthz", "", ""); w.Code != http.StatusOK {
		t.Errorf("healthz: %d", w.Code)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"no postgres", Config{}, ErrConfig},
		{"unknown plan", Config{Postgres: "postgres://x", Plan: "gold"}, ErrConfig},
		{"negative slots", Config{Postgres: "postgres://x", Slots: -1}, ErrConfig},
		{"report sleep above a minute", Config{Postgres: "postgres://x", ReportSleep: 2 * time.Minute}, ErrConfig},
		{"collector not http", Config{Postgres: "postgres://x", Collector: "ftp://c:7070"}, agent.ErrConfig},
	} {
		if _, err := New(context.Background(), c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  LoadConfig
		want string
	}{
		{"no target", LoadConfig{Tenants: 2}, "--target is required"},
		{"no tenants", LoadConfig{Target: "http://a", Tenants: 0}, "--tenants 0"},
		{"bad route", LoadConfig{Target: "http://a", Tenants: 2, NoisyRoute: "delete"}, "--noisy-route"},
		{"bad noisy", LoadConfig{Target: "http://a", Tenants: 2, Noisy: "a\nb"}, "--noisy"},
		{"negative pace", LoadConfig{Target: "http://a", Tenants: 2, Pace: -time.Second}, "negative"},
	} {
		_, err := NewLoad(c.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrConfig with %q", c.name, err, c.want)
		}
	}
}

func TestRunFlags(t *testing.T) {
	t.Setenv("SHOPAPP_POSTGRES", "")
	for _, c := range []struct {
		args []string
		want string
		is   error
	}{
		{[]string{"--help"}, "", flag.ErrHelp},
		{[]string{"load", "--help"}, "", flag.ErrHelp},
		{[]string{"serve"}, "PostgreSQL DSN is required", ErrConfig},
		{[]string{"serve", "--postgres", "postgres://x", "extra"}, `unexpected argument "extra"`, nil},
		{[]string{"load", "--tenants", "0"}, "--tenants 0", ErrConfig},
		{[]string{"load", "--duration", "0s"}, "--duration 0s", ErrConfig},
		{[]string{"load", "--nope"}, "flag provided but not defined", nil},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), c.args, &stdout, &stderr)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %v with %q", c.args, err, c.is, c.want)
		}
		if errors.Is(err, flag.ErrHelp) && !strings.Contains(stderr.String(), "Examples:") {
			t.Errorf("%v: help without examples:\n%s", c.args, stderr.String())
		}
	}
}

func TestWriteSummary(t *testing.T) {
	l, err := NewLoad(LoadConfig{Target: "http://a", Tenants: 3, Noisy: "bigcorp"})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.count("tenant-02", http.StatusOK)
	}
	l.count("tenant-01", http.StatusOK)
	l.count("tenant-01", http.StatusTeapot) // counted as other
	l.count("bigcorp", http.StatusOK)
	l.count("bigcorp", http.StatusTooManyRequests)
	l.count("bigcorp", http.StatusServiceUnavailable)
	var b bytes.Buffer
	if err := l.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"           TENANT  200  429  503  OTHER\n" +
		"  bigcorp (noisy)    1    1    1      0\n" +
		"        tenant-02    5    0    0      0\n" +
		"        tenant-01    1    0    0      1\n"
	if got := stripTrailing(b.String()); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}

func stripTrailing(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// A load against a server that refuses one tenant counts what each got.
func ExampleLoad() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderTenant) == "bigcorp" {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "throttled", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "[]")
	}))
	defer srv.Close()
	l, err := NewLoad(LoadConfig{Target: srv.URL, Tenants: 2, Noisy: "bigcorp", Pace: time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	l.Run(ctx)
	fmt.Println(l.Count("bigcorp", http.StatusOK) == 0, l.Count("bigcorp", http.StatusTooManyRequests) > 0)
	fmt.Println(l.Count("tenant-01", http.StatusOK) > 0, l.Count("tenant-01", http.StatusTooManyRequests) == 0)
	// Output:
	// true true
	// true true
}

// BenchmarkProducts prices qtop's wiring per request: GET /products through
// the app's full chain (edge, span, enforce, sqlcomment, observer) against
// the same query and encoding on a plain database/sql pool over pgx.
func BenchmarkProducts(b *testing.B) {
	dsn := testsvc.Postgres(b)
	schema := "shopapp_bench_" + hex8(b)
	a, err := New(context.Background(), Config{Postgres: dsn, Schema: schema, Plan: enforce.PlanEnterprise})
	if err != nil {
		b.Fatal(err)
	}
	plain, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = a.Shutdown(context.Background())
		_, _ = plain.Exec("DROP SCHEMA IF EXISTS " + pgx.Identifier{schema}.Sanitize() + " CASCADE")
		plain.Close()
	})
	if w := serve(a.Handler(), "POST", "/catalog/import?n=50", "acme", "T1"); w.Code != http.StatusOK {
		b.Fatalf("import: %d", w.Code)
	}
	table := pgx.Identifier{schema, "products"}.Sanitize()
	bareWith := func(lead ...any) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			args := append(lead, r.Header.Get(HeaderTenant), 20)
			rows, err := plain.QueryContext(r.Context(), "SELECT id, name, price::float8 FROM "+table+" WHERE tenant = $1 ORDER BY id DESC LIMIT $2", args...)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			defer rows.Close()
			out := []product{}
			for rows.Next() {
				var p product
				if err := rows.Scan(&p.ID, &p.Name, &p.Price); err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
				out = append(out, p)
			}
			writeJSON(w, out)
		})
	}
	// bare: pgx's cached prepared statement; bare-exec: the unnamed
	// statement (QueryExecModeExec), as the wrapper sends tagged texts.
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", bareWith()}, {"bare-exec", bareWith(pgx.QueryExecModeExec)}, {"bare-simple", bareWith(pgx.QueryExecModeSimpleProtocol)}, {"wired", a.Handler()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if w := serve(c.h, "GET", "/products", "acme", "T1"); w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}

func hex8(b *testing.B) string {
	var x [4]byte
	if _, err := rand.Read(x[:]); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(x[:])
}

// TestNewTogetherOnOneSchema starts several apps at once on a schema none
// of them has made yet, as a deployment rolling out replicas does: each
// must start. Without the migration's lock, concurrent CREATE … IF NOT
// EXISTS statements collide in PostgreSQL's catalog ("duplicate key value
// violates unique constraint") and some of them fail.
func TestNewTogetherOnOneSchema(t *testing.T) {
	dsn := testsvc.Postgres(t)
	plain, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	const apps = 8
	for round := range 5 {
		schema := "shopapp_race_" + suffix(t)
		errs := make(chan error, apps)
		started := make(chan *App, apps)
		start := make(chan struct{})
		for range apps {
			go func() {
				<-start
				a, err := New(context.Background(), Config{Postgres: dsn, Schema: schema, Service: "shopapp-race"})
				if err != nil {
					errs <- err
					return
				}
				started <- a
				errs <- nil
			}()
		}
		close(start)
		var failed []error
		for range apps {
			if err := <-errs; err != nil {
				failed = append(failed, err)
			}
		}
		close(started)
		for a := range started {
			if err := a.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}
		if _, err := plain.Exec("DROP SCHEMA IF EXISTS " + pgx.Identifier{schema}.Sanitize() + " CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		if len(failed) > 0 {
			t.Fatalf("round %d: %d of %d apps failed to start on one new schema; first: %v", round, len(failed), apps, failed[0])
		}
	}
}
