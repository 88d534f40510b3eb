package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func suffix(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// eventually polls cond every 100 ms until it returns nil or d has passed,
// and then fails with its last error.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	var err error
	if !testsvc.PollEvery(d, 100*time.Millisecond, func() bool { err = cond(); return err == nil }) {
		t.Fatalf("%s: not within %v: %v", what, d, err)
	}
}

// TestLoop proves the whole loop on the real PostgreSQL and an in-process
// collector on DuckDB: tagged load reaches PostgreSQL and the collector,
// which ranks the noisy tenant first; a throttle posted to the collector
// reaches the app in a report reply and the app enforces it on that tenant
// only; the enforcement counters come back to the collector.
func TestLoop(t *testing.T) {
	dsn := testsvc.Postgres(t)
	id := suffix(t)
	schema := "shopapp_test_" + id
	noisy := "noisy-" + id
	service := "shopapp-test-" + id

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A plain connection, without comments, to look at PostgreSQL and to
	// drop the schema at the end.
	plain, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	defer func() {
		if _, err := plain.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	}()

	// The collector, in process, on a DuckDB file of the test.
	dir := t.TempDir()
	coll, err := collector.New(collector.Config{
		Store: "duckdb://" + filepath.Join(dir, "qtop.duckdb"), DataDir: filepath.Join(dir, "data"),
		Writer: "w1", Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	collSrv := httptest.NewServer(coll.Handler())
	runCtx, stopRun := context.WithCancel(ctx)
	var runWG sync.WaitGroup
	runWG.Go(func() { coll.Run(runCtx) })
	defer func() {
		stopRun()
		sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		if err := coll.Shutdown(sctx); err != nil {
			t.Errorf("collector shutdown: %v", err)
		}
		runWG.Wait()
		collSrv.Close()
	}()

	// The app, in process, reporting every 200 ms. Every tenant is on
	// the enterprise plan, so nothing is throttled before the policy.
	app, err := New(ctx, Config{Postgres: dsn, Collector: collSrv.URL, Service: service, Schema: schema,
		Plan: "enterprise", Interval: 200 * time.Millisecond, ReportSleep: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}

	appSrv := httptest.NewServer(app.Handler())
	defer appSrv.Close()
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := app.Shutdown(sctx); err != nil {
			t.Errorf("app shutdown: %v", err)
		}
	}()

	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	load, err := NewLoad(LoadConfig{Target: appSrv.URL, Tenants: 2, Workers: 2, Pace: 10 * time.Millisecond,
		Noisy: noisy, NoisyRoute: "reports", NoisyWorkers: 6, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	small := load.Tenants()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadWG sync.WaitGroup
	loadWG.Go(func() { load.Run(loadCtx) })
	defer func() {
		stopLoad()
		loadWG.Wait()
		var buf bytes.Buffer
		_ = load.WriteSummary(&buf)
		t.Logf("load:\n%s", buf.String())
	}()

	// (b) The noisy tenant's statements reach PostgreSQL with its tags.
	eventually(t, 20*time.Second, "a tagged statement of the noisy tenant in pg_stat_activity", func() error {
		var q string
		err := plain.QueryRowContext(ctx,
			"SELECT query FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE $1 LIMIT 1",
			"%tenant='"+noisy+"'%").Scan(&q)
		if err != nil {
			return err
		}
		tags, err := sqlcomment.Parse(q)
		if err != nil {
			return fmt.Errorf("%q: %w", q, err)
		}
		if tags["tenant"] != noisy || tags["route"] != "GET /reports" || tags["tier"] != "T2" || tags["application"] != service {
			return fmt.Errorf("tags %v of %q", tags, q)
		}
		return nil
	})

	// (a) The collector ranks the noisy tenant first by DB load and by RU.
	for _, m := range []string{api.MeasureDB, api.MeasureRU} {
		eventually(t, 30*time.Second, "noisy tenant first by "+m, func() error {
			s := coll.Snapshot(time.Now(), m, 10)
			if len(s.Tenants) < 3 {
				return fmt.Errorf("%d tenants in the snapshot: %+v", len(s.Tenants), s.Tenants)
			}
			if s.Tenants[0].Tenant != noisy {
				return fmt.Errorf("first is %q: %+v", s.Tenants[0].Tenant, s.Tenants)
			}
			top, next := s.Tenants[0], s.Tenants[1]
			if top.DBLoad <= next.DBLoad || top.RUPerSec <= next.RUPerSec {
				return fmt.Errorf("noisy %+v not above %+v", top, next)
			}
			return nil
		})
	}
	if n := load.Count(noisy, http.StatusTooManyRequests); n != 0 {
		t.Fatalf("the noisy tenant got %d 429s before any throttle", n)
	}

	// (c) A throttle posted through the collector's policy API reaches the
	// app in a report reply: the noisy tenant gets 429 with Retry-After,
	// the small tenants still get 200.
	lc, err := api.NewClient(collSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.PostPolicy(ctx, policy.Rule{Tenant: "nobody", Action: policy.Throttle, RUPerSecond: 1,
		Expires: time.Now().Add(time.Hour), Reason: "wrong token"}, "not-the-token"); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("policy with a wrong token: %v, want ErrUnauthorized", err)
	}
	p, err := lc.PostPolicy(ctx, policy.Rule{Tenant: noisy, Action: policy.Throttle, RUPerSecond: 1,
		Expires: time.Now().Add(time.Hour), Reason: "reports storm"}, coll.Token())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the app applies the collector's policy", func() error {
		if v := app.Enforcer().Policy().Version; v < p.Version {
			return fmt.Errorf("app policy version %d, collector's %d", v, p.Version)
		}
		return nil
	})
	eventually(t, 10*time.Second, "429 with Retry-After for the noisy tenant", func() error {
		resp, err := get(ctx, client, appSrv.URL+"/reports", noisy)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			return fmt.Errorf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		return nil
	})
	for _, s := range small {
		eventually(t, 10*time.Second, "200 for small tenant "+s, func() error {
			resp, err := get(ctx, client, appSrv.URL+"/products", s)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		})
	}
	before := load.Count(noisy, http.StatusTooManyRequests)
	eventually(t, 10*time.Second, "the load's noisy requests refused", func() error {
		if n := load.Count(noisy, http.StatusTooManyRequests); n <= before+10 {
			return fmt.Errorf("%d 429s so far", n)
		}
		return nil
	})

	// (d) The enforcement counters reach the collector.
	eventually(t, 10*time.Second, "throttled requests in the collector's snapshot", func() error {
		s := coll.Snapshot(time.Now(), api.MeasureRU, 10)
		if th := s.Enforcement.Tiers[tenant.T2.Index()].Throttled; th == 0 {
			return fmt.Errorf("T2 enforcement %+v", s.Enforcement.Tiers[tenant.T2.Index()])
		}
		if s.Enforcement.Tiers[tenant.T1.Index()].Admitted == 0 {
			return fmt.Errorf("T1 enforcement %+v", s.Enforcement.Tiers[tenant.T1.Index()])
		}
		return nil
	})
	// The live API says the same to a client such as qtop.
	snap, err := lc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Enforcement.Tiers[tenant.T2.Index()].Throttled == 0 {
		t.Errorf("GET /v1/live: T2 enforcement %+v", snap.Enforcement.Tiers[tenant.T2.Index()])
	}
	found := false
	for _, r := range snap.Tenants {
		if r.Tenant == noisy {
			found = true
			if !r.Throttled {
				t.Errorf("GET /v1/live: %s not marked throttled", noisy)
			}
		}
	}
	if !found {
		t.Errorf("GET /v1/live: %s missing from %+v", noisy, snap.Tenants)
	}

	stopLoad()
	loadWG.Wait()
	for _, s := range small {
		if n := load.Count(s, http.StatusTooManyRequests); n != 0 {
			t.Errorf("small tenant %s got %d 429s", s, n)
		}
		if load.Count(s, http.StatusOK) == 0 {
			t.Errorf("small tenant %s got no 200", s)
		}
	}
}

func get(ctx context.Context, c *http.Client, url, tenantName string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(HeaderTenant, tenantName)
	req.Header.Set(HeaderTier, "T1")
	if strings.HasPrefix(tenantName, "noisy-") {
		req.Header.Set(HeaderTier, "T2")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}
