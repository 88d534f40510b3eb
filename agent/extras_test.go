package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/fairqueue"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// realCollector serves a real collector without a store.
func realCollector(t *testing.T) (*collector.Server, string) {
	t.Helper()
	s, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.Run(ctx)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		cancel()
		s.Shutdown(context.Background())
	})
	return s, hs.URL
}

// eventually waits for check, at most 20 s.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	testsvc.Eventually(t, 20*time.Second, what, check)
}

// TestBudgetsFromTheCollector: a budget set on a real collector reaches
// the agent's database handle through the report reply and refuses the
// statement before it is sent to the real PostgreSQL; the refusal comes
// back to the collector's live view.
func TestBudgetsFromTheCollector(t *testing.T) {
	dsn := testsvc.Postgres(t)
	s, url := realCollector(t)
	ctx := context.Background()
	if _, err := s.SetBudget(ctx, policy.Budget{ID: "acme-short", Match: []map[string]string{{"tenant": "acme"}},
		MaxStatementSeconds: 0.001, Mode: policy.Enforce, Reason: "test"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, WithCollector(url, ""), WithService("budgets-test"), WithInterval(50*time.Millisecond),
		WithTenant(FromHeader("X-Tenant", "")), WithBudgets(sqlcomment.NewBudgets()))
	db, err := a.OpenDB("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var last error
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var one int
		last = db.QueryRowContext(r.Context(), "SELECT 1").Scan(&one)
	}))
	eventually(t, "the budget refuses acme's statement", func() bool {
		serve(h, "GET", "/q", "X-Tenant", "acme")
		return errors.Is(last, sqlcomment.ErrBudget)
	})
	if serve(h, "GET", "/q", "X-Tenant", "globex"); last != nil {
		t.Fatalf("globex, outside the budget: %v", last)
	}
	eventually(t, "the collector sees the refusal", func() bool {
		for _, b := range s.Live().Budgets {
			if b.ID == "acme-short" && b.Refused > 0 {
				return true
			}
		}
		return false
	})
}

// TestFreshnessFromTheCollector: a freshness batch forced on a real
// collector reaches the agent, whose handler then answers a push-triggered
// GET with a fresh ETag by 304 without running the handler; the rule's
// counters come back to the collector's freshness view.
func TestFreshnessFromTheCollector(t *testing.T) {
	s, url := realCollector(t)
	ctx := context.Background()
	signer, err := freshness.NewETagSigner([]byte("a key of sixteen bytes or more"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetFreshness(ctx, policy.Freshness{Rules: policy.MonzoRules(), Batch: 3, Force: true,
		ForceUntil: time.Now().Add(time.Hour), Reason: "test"}, "test"); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, WithCollector(url, ""), WithService("fresh-test"), WithInterval(50*time.Millisecond),
		WithTenant(FromHeader("X-Tenant", "")), WithFreshness(signer))
	ran := 0
	mux := http.NewServeMux()
	mux.Handle("GET /balance", a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran++
		w.Write([]byte(`{"balance":100}`))
	})))
	first := serve(mux, "GET", "/balance", "X-Tenant", "acme")
	etag := first.Header().Get("ETag")
	if first.Code != http.StatusOK || etag == "" {
		t.Fatalf("first GET: %d, ETag %q", first.Code, etag)
	}
	var w *httptest.ResponseRecorder
	eventually(t, "a push-triggered GET is answered 304 without the handler", func() bool {
		before := ran
		w = serve(mux, "GET", "/balance", "X-Tenant", "acme", "If-None-Match", etag, freshness.HeaderCause, "Push-Notification")
		return w.Code == http.StatusNotModified && ran == before
	})
	if w.Header().Get("ETag") != etag {
		t.Errorf("304 with ETag %q, want the client's %q", w.Header().Get("ETag"), etag)
	}
	// An interactive GET is never shed.
	before := ran
	if w := serve(mux, "GET", "/balance", "X-Tenant", "acme", "If-None-Match", etag); ran != before+1 || w.Code == http.StatusNotModified && w.Header().Get("Qtop-Shed-Rule") != "" {
		t.Fatalf("interactive GET: %d, handler ran %d times more, shed rule %q", w.Code, ran-before, w.Header().Get("Qtop-Shed-Rule"))
	}
	eventually(t, "the collector counts the rule's 304s", func() bool {
		for _, r := range s.Freshness().Rules {
			if r.Rule == "push-24h" && r.Served > 0 {
				return true
			}
		}
		return false
	})
}

// slots is a fairqueue.Limiter of n slots per tenant in this process (the
// lease semaphore's behaviour across processes is lease's to test).
type slots struct {
	mu           sync.Mutex
	n, max, used int
	granted      int
}

func (s *slots) Acquire(_ context.Context, _ string) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.n {
		return false, time.Millisecond
	}
	s.used++
	s.granted++
	s.max = max(s.max, s.used)
	return true, 0
}

func (s *slots) Release(string) { s.mu.Lock(); s.used--; s.mu.Unlock() }

// TestWorkersTakeALimiter: the agent's worker pool takes the fair queue's
// Limiter option (lease.Semaphore in a fleet): eight workers run at most
// the limiter's two jobs of a tenant at once, every job runs, and every
// slot is given back. The first job runs until a second one holds the
// other slot, so the limit is reached (exactly 2 at once), not just kept.
func TestWorkersTakeALimiter(t *testing.T) {
	a := newAgent(t, WithPlans(map[string]enforce.Plan{ // a plan that admits every job
		enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1e6, Burst: 1e6}, Weight: 1},
	}, nil))
	lim := &slots{n: 2}
	var ran atomic.Int64
	var first atomic.Bool
	w, err := NewWorkers(a, 8, func(ctx context.Context, v int) error {
		if first.CompareAndSwap(false, true) {
			if !testsvc.Poll(10*time.Second, func() bool {
				lim.mu.Lock()
				defer lim.mu.Unlock()
				return lim.max == 2
			}) {
				t.Error("no second job ran beside the first")
			}
		}
		ran.Add(1)
		return nil
	}, fairqueue.WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := w.Submit(context.Background(), tenant.Tags{Tenant: "bigco"}, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if ran.Load() != 40 || lim.granted != 40 || lim.max != 2 || lim.used != 0 {
		t.Fatalf("ran %d, granted %d, at most %d at once (limit 2), %d slots still used", ran.Load(), lim.granted, lim.max, lim.used)
	}
}
