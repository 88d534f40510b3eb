package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestPGSignalThroughTheCollector: qtop on a collector cancels the
// statement it was shown through the collector's connection, with the
// admin token only, never a statement the session moved on to, and the
// collector audits it; without a sampler it says so.
func TestPGSignalThroughTheCollector(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	c, _ := api.NewClient(srv.URL)

	// Without a sampler: refused, saying why.
	if err := c.Signal(ctx, api.PGSignal{Action: api.SignalCancel, PID: 1, QueryStart: t0}, f.token); err == nil ||
		!strings.Contains(err.Error(), "samples no PostgreSQL") {
		t.Fatalf("signal without a sampler: %v", err)
	}
	f.s.pg.setPool(pool)

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("signal-%d", time.Now().UnixNano())
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(60) /*"+tag+"*/")
		done <- err
	}()
	var started time.Time
	deadline := time.Now().Add(30 * time.Second)
	for started.IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the sleeping statement never showed in pg_stat_activity")
		}
		var qs *time.Time
		if err := pool.QueryRow(ctx, "SELECT query_start FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE '%'||$2||'%'", pid, tag).Scan(&qs); err == nil && qs != nil {
			started = *qs
		}
	}
	sig := api.PGSignal{Action: api.SignalCancel, PID: pid, QueryStart: started, Actor: "alice"}
	if err := c.Signal(ctx, sig, "wrong"); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("signal with a wrong token: %v", err)
	}
	other := sig
	other.QueryStart = started.Add(-time.Second) // a statement the session ran before
	if err := c.Signal(ctx, other, f.token); !errors.Is(err, api.ErrMovedOn) {
		t.Fatalf("signal of a statement no longer running: %v", err)
	}
	if err := c.Signal(ctx, api.PGSignal{Action: "kill", PID: pid}, f.token); err == nil || !strings.Contains(err.Error(), "want cancel or terminate") {
		t.Fatalf("a bad action: %v", err)
	}
	if err := c.Signal(ctx, sig, f.token); err != nil {
		t.Fatalf("signal: %v", err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("the statement was not cancelled: %v", err)
	}
	// A pid that is no backend (any more): nothing is signalled, as when
	// the backend moved on.
	if err := c.Signal(ctx, api.PGSignal{Action: api.SignalCancel, PID: 1, QueryStart: started}, f.token); !errors.Is(err, api.ErrMovedOn) {
		t.Fatalf("signal of no backend: %v", err)
	}
	var audited bool
	for _, a := range auditsOf(t, f) {
		audited = audited || a.Action == "pg-cancel" && strings.Contains(a.Rule, `"actor":"alice"`)
	}
	if !audited {
		t.Fatalf("no pg-cancel in the audit: %+v", auditsOf(t, f))
	}
}
