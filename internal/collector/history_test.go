package collector

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// TestHistoryEndpoint: the per-minute history of a tenant comes from the
// (real, DuckDB) store, for the last minutes asked, and bad requests are
// refused with a reason.
func TestHistoryEndpoint(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: t0}
	s, err := New(Config{Store: "duckdb://" + filepath.Join(dir, "h.duckdb"), DataDir: filepath.Join(dir, "data"), Writer: "w1",
		Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	base := t0.Truncate(time.Minute)
	var rows []store.Rollup
	for i := range 3 {
		m := base.Add(time.Duration(i-2) * time.Minute)
		rows = append(rows, store.Rollup{Minute: m, Writer: "w1", Version: 1, Service: "api",
			Tenant: "acme", Route: "GET /x", Kind: "request", Count: uint64(60 * (i + 1)), Errors: 6, RU: 600, DurationSeconds: 50})
		// DB load: the statements' time, and what the sampler's sessions
		// held beyond it (the cost report's DB time): 30 s + (120 − 30) s
		// in the first two minutes; 90 s of statements alone (no sampler)
		// in the third.
		db := store.Rollup{Minute: m, Writer: "w1", Version: 1, Service: "api", Tenant: "acme", Route: "SELECT orders", Kind: "db", Count: 100, DurationSeconds: 30}
		if i == 2 {
			db.DurationSeconds = 90
		} else {
			rows = append(rows, store.Rollup{Minute: m, Writer: "w1", Version: 1, Tenant: "acme", Kind: "pg", Count: 60, ActiveSessionSeconds: 120, DurationSeconds: 30})
		}
		rows = append(rows, db)
	}
	rows = append(rows, store.Rollup{Minute: base.Add(-3 * time.Hour), Writer: "w1", Version: 1, Service: "api", Tenant: "acme", Route: "GET /x",
		Kind: "request", Count: 1})
	if err := s.Store().WriteRollups(ctx, rows); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c, _ := api.NewClient(srv.URL)
	h, err := c.History(ctx, "acme", 60)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Points) != 3 || h.Points[2].ReqPerSec != 3 || h.Points[0].RUPerSec != 10 || h.Points[0].DBLoad != 2 || h.Points[1].DBLoad != 2 || h.Points[2].DBLoad != 1.5 || h.Points[1].ErrPerSec != 0.1 ||
		!h.Points[0].Minute.Equal(base.Add(-2*time.Minute)) {
		t.Fatalf("history %+v", h)
	}
	if h, err = c.History(ctx, "acme", api.MaxHistoryMinutes); err != nil || len(h.Points) != 4 {
		t.Fatalf("24 h: %+v %v", h, err)
	}
	for _, q := range []string{"tenant=acme&minutes=0", "tenant=acme&minutes=99999", "tenant=acme&minutes=x", "tenant=", "tenant=%00"} {
		resp, eb := getError(t, srv.URL+api.PathHistory+"?"+q)
		if resp.StatusCode != http.StatusBadRequest || eb.Error == "" {
			t.Errorf("%s: %d %q", q, resp.StatusCode, eb.Error)
		}
	}
}

// TestHistoryWithoutStore: a collector without a store says so with 503
// and what to do, not "bad request": the request was fine.
func TestHistoryWithoutStore(t *testing.T) {
	s, err := New(Config{Store: StoreNone, DataDir: t.TempDir(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, eb := getError(t, srv.URL+api.PathHistory+"?tenant=acme&minutes=10")
	if resp.StatusCode != http.StatusServiceUnavailable || eb.Error != ErrNoStore.Error() {
		t.Errorf("%d %q, want 503 %q", resp.StatusCode, eb.Error, ErrNoStore)
	}
}

// getError GETs url and decodes its answer as an api.ErrorBody (empty
// when it is not one).
func getError(t *testing.T, url string) (*http.Response, api.ErrorBody) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var eb api.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	return resp, eb
}

// TestHistoryOfTenantNamedOther: a tenant really named "other" is stored
// under its stand-in (tenant.Escape), so its history asked by its name is
// its own — as its cost report, rules and erasure are — not the overflow
// row's, which is stored as "other".
func TestHistoryOfTenantNamedOther(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{Store: "duckdb://" + filepath.Join(dir, "h.duckdb"), DataDir: filepath.Join(dir, "data"), Writer: "w1",
		Registerer: prometheus.NewRegistry(), Now: (&clock{t: t0}).Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	m := t0.Truncate(time.Minute).Add(-time.Minute)
	own := tenant.Escape(tenant.Other)
	if err := s.Store().WriteRollups(ctx, []store.Rollup{
		{Minute: m, Writer: "w1", Version: 1, Service: "api", Tenant: report.OtherTenant, Route: "GET /x", Kind: "request", Count: 60, RU: 6000},
		{Minute: m, Writer: "w1", Version: 1, Service: "api", Tenant: own, Route: "GET /x", Kind: "request", Count: 60, RU: 60},
	}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	c, _ := api.NewClient(srv.URL)
	for _, name := range []string{tenant.Other, own} {
		h, err := c.History(ctx, name, 60)
		if err != nil {
			t.Fatal(err)
		}
		if h.Tenant != own || len(h.Points) != 1 || h.Points[0].RUPerSec != 1 {
			t.Errorf("history of %q: %+v, want %s's own (1 RU/s), not the overflow row's (100 RU/s)", name, h, own)
		}
	}
}
