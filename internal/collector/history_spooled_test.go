package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/store"
)

// TestHistorySpooledIs503: while minutes of the range wait in the spool
// (the store reads but cannot write: a replicated table without
// ZooKeeper), the history is 503 with Retry-After and the reason, not the
// store's points without the spooled minutes; once the store writes again
// the same request has every point.
func TestHistorySpooledIs503(t *testing.T) {
	mem := newMemStore()
	mem.fail = fmt.Errorf("code: 242, Table is in readonly mode: %w", store.ErrUnavailable)
	clk := &clock{t: t0}
	dir := t.TempDir()
	s, err := New(Config{Store: "clickhouse://127.0.0.1:1/x", DataDir: filepath.Join(dir, "data"), Writer: "w1",
		Registerer: prometheus.NewRegistry(), Now: clk.Now,
		OpenStore: func(string) (store.Store, error) { return readsWhileFailing{mem}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	base := t0.Truncate(time.Minute)
	row := store.Rollup{Minute: base.Add(-time.Minute), Writer: "w1", Version: 1, Service: "api",
		Tenant: "acme", Route: "GET /x", Kind: "request", Count: 60}
	if err := s.Store().WriteRollups(ctx, []store.Rollup{row}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, eb := getError(t, srv.URL+api.PathHistory+"?tenant=acme&minutes=10")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || eb.Error == "" {
		t.Fatalf("%d Retry-After %q %q: want 503 with Retry-After and the reason", resp.StatusCode, resp.Header.Get("Retry-After"), eb.Error)
	}
	// The cost report of the range is refused the same way, not billed
	// without the spooled minute.
	resp, err = http.Get(srv.URL + "/v1/report?from=1h&format=json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("report: %d Retry-After %q: want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	mem.mu.Lock()
	mem.fail = nil
	mem.mu.Unlock()
	c, _ := api.NewClient(srv.URL)
	h, err := c.History(ctx, "acme", 10)
	if err != nil || len(h.Points) != 1 || h.Points[0].ReqPerSec != 1 {
		t.Fatalf("history once the store writes: %+v %v", h, err)
	}
}

// readsWhileFailing is a memStore whose History answers from what it
// holds even while its writes fail.
type readsWhileFailing struct{ *memStore }

func (r readsWhileFailing) History(ctx context.Context, tenant string, from, to time.Time) ([]store.Rollup, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []store.Rollup
	for _, x := range r.rollups {
		if x.Tenant == tenant && !x.Minute.Before(from) && x.Minute.Before(to) {
			out = append(out, x)
		}
	}
	return out, nil
}

func (r readsWhileFailing) Ping(context.Context) error { return nil }

// TestSpoolAgeWhileStoreDown: the age of the spool's oldest batch is
// exported while the store is down, when the spool grows (it was set only
// after a ping that answered, so it read 0 for the whole outage).
func TestSpoolAgeWhileStoreDown(t *testing.T) {
	mem := newMemStore()
	mem.fail = fmt.Errorf("connection refused: %w", store.ErrUnavailable)
	s, err := New(Config{Store: "clickhouse://127.0.0.1:1/x", DataDir: t.TempDir(), Writer: "w1",
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	row := store.Rollup{Minute: t0.Truncate(time.Minute), Writer: "w1", Version: 1, Service: "api",
		Tenant: "acme", Route: "GET /x", Kind: "request", Count: 60}
	if err := s.Store().WriteRollups(context.Background(), []store.Rollup{row}); err != nil {
		t.Fatal(err)
	}
	s.em.check(context.Background())
	if got := testutil.ToFloat64(s.em.guard.spoolStuck); got <= 0 {
		t.Fatalf("spool age %v with the store down and a batch spooled, want > 0", got)
	}
}
