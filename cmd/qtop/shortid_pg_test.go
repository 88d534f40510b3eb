package main

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// TestOncePostgresShortID: under qtop --postgres alone, a tenant whose
// name is too long for application_name, with one session tagged by its
// short id (session mode) and one statement commented with its name, is
// one row with both sessions' load, under its name; no row shows the id.
// Before, the id and the name were two rows of 1 each. Each session is
// left active, waiting for an advisory lock the test holds: a session
// frees a lock of its own in the statement that then waits, and the test
// takes that lock, so it knows the statement runs without polling.
func TestOncePostgresShortID(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx := context.Background()
	long := fmt.Sprintf("%s-%08x", strings.Repeat("ü", 25), mrand.Uint32())
	lctx := tenant.With(ctx, tenant.Tags{Tenant: long, Route: "GET /r", Tier: tenant.T2})
	hold, free1, free2 := mrand.Int64(), mrand.Int64(), mrand.Int64()
	holder := pgConn(t, dsn)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", hold); err != nil {
		t.Fatal(err)
	}
	const wait = "SELECT pg_advisory_lock_shared($2) FROM (SELECT pg_advisory_unlock($1)) AS freed"
	byID := pgConn(t, dsn)
	tx, err := pgxcomment.Wrap(byID, sqlcomment.WithApplication("svc"), sqlcomment.WithMode(sqlcomment.ModeSession)).Begin(lctx)
	if err != nil {
		t.Fatal(err)
	}
	commented := pgConn(t, dsn)
	done := make(chan error, 2)
	for _, s := range []struct {
		q     pgxcomment.Querier
		c     *pgx.Conn
		free  int64
		query string
	}{{tx, byID, free1, wait}, {commented, commented, free2, sqlcomment.Append(wait, map[string]string{sqlcomment.KeyTenant: long})}} {
		if _, err := s.c.Exec(ctx, "SELECT pg_advisory_lock($1)", s.free); err != nil {
			t.Fatal(err)
		}
		go func() { _, err := s.q.Exec(ctx, s.query, s.free, hold); done <- err }()
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", s.free); err != nil { // returns once the statement runs
			t.Fatal(err)
		}
	}
	defer func() {
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			t.Error(err)
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		tx.Rollback(ctx)
	}()

	s := postgresOnce(t, dsn)
	id := sqlcomment.TenantID(long)
	load := map[string]float64{}
	for _, r := range s.Tenants {
		load[r.Tenant] = r.DBLoad
	}
	if load[long] != 2 || load[id] != 0 {
		t.Errorf("%q: DB load %v, its id %s: %v; want 2 under the name and no row for the id", long, load[long], id, load[id])
	}
}

func pgConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
