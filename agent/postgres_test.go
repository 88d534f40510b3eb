package agent

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/tenant"
)

// TestPostgresDBTimeCommentAndPoolWait runs statements through both of the
// agent's database paths against the real PostgreSQL: the comment the
// server sees and the DB-time record name the same tenant, and the time a
// tenant waits for a pgxpool connection held by another is recorded as
// its pool wait.
func TestPostgresDBTimeCommentAndPoolWait(t *testing.T) {
	dsn := testsvc.Postgres(t)
	a := newAgent(t, WithService("agent-test"), WithTenant(FromHeader("X-Tenant", "")))
	ctx := context.Background()

	db, err := a.OpenDB("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seen string
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := db.QueryRowContext(r.Context(), "SELECT current_query()").Scan(&seen); err != nil {
			t.Error(err)
		}
	}))
	serve(h, "GET", "/q", "X-Tenant", "acme")
	if !strings.Contains(seen, "tenant='acme'") || !strings.Contains(seen, "application='agent-test'") {
		t.Errorf("PostgreSQL saw %q", seen)
	}
	if got := rows(a); got["acme||db"].Count != 1 || got["acme||request"].Count != 1 {
		t.Errorf("rows %v", got)
	}

	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pdb, pool, err := a.OpenPgxPool(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// Connect first, so that hog's acquisition below waits for nothing.
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	hog := tenant.With(ctx, tenant.Tags{Tenant: "hog"})
	hogStart := time.Now()
	held, err := pool.Acquire(hog)
	hogCall := time.Since(hogStart)
	if err != nil {
		t.Fatal(err)
	}
	a.pool.take() // the ping's untagged wait
	const hold = 20 * time.Millisecond
	go func() {
		// Release once the victim is waiting, and not before 20 ms more:
		// its wait is then at least 20 ms, whatever the machine's load.
		if !testsvc.Poll(10*time.Second, func() bool { return pool.Stat().EmptyAcquireCount() > 0 }) {
			t.Error("the victim never waited for a connection")
		}
		time.AfterFunc(hold, held.Release)
	}()
	h2 := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := pdb.Exec(r.Context(), "SELECT 1"); err != nil {
			t.Error(err)
		}
	}))
	serve(h2, "GET", "/p", "X-Tenant", "victim")
	waits := a.pool.take()
	byTenant := map[string]time.Duration{}
	for _, w := range waits {
		byTenant[w.Tenant] = w.Wait
	}
	// The tracer starts the victim's clock before the pool finds no
	// connection free, so its wait is at least the hold; hog's, no more
	// than its call took.
	if byTenant["victim"] < hold || byTenant["hog"] > hogCall {
		t.Errorf("pool waits %+v: victim should have waited at least %v for hog's connection, hog at most its call's %v", waits, hold, hogCall)
	}
	if got := rows(a); got["victim||db"].Count != 1 {
		t.Errorf("rows %v", got)
	}
}
