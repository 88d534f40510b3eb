package pgactivity

import (
	"context"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// TestSessionTagged: sessions tagged through application_name
// (sqlcomment.ModeSession) are attributed to their tenant and tier, keep
// their service as Application, and a tenant written as its id is named
// through WithTenantNames; an active one counts in its tenant's AAS.
func TestSessionTagged(t *testing.T) {
	sfx := suffix(t)
	svc, acme, long := "svc-"+sfx, "acme-"+sfx, strings.Repeat("ü", 25)+sfx
	names := sqlcomment.NewTenantNames(0)
	idle, active := connect(t), connect(t)
	opts := []sqlcomment.Option{sqlcomment.WithApplication(svc), sqlcomment.WithMode(sqlcomment.ModeSession), sqlcomment.WithTenantNames(names)}

	// An idle transaction of the long-named tenant, which stays listed.
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: long, Tier: tenant.T3})
	tx, err := pgxcomment.Wrap(idle.conn, opts...).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())

	// An active statement of acme, in a tagged transaction.
	actx := tenant.With(context.Background(), tenant.Tags{Tenant: acme, Tier: tenant.T1})
	atx, err := pgxcomment.Wrap(active.conn, opts...).Begin(actx)
	if err != nil {
		t.Fatal(err)
	}
	sleepCtx, stop := context.WithCancel(context.Background())
	active.done = make(chan error, 1)
	go func() {
		_, err := atx.Exec(sleepCtx, "SELECT pg_sleep(30)")
		active.done <- err
	}()

	s := NewSampler(newPool(t, "", ""), WithTenantNames(names.Lookup))
	snap := waitFor(t, s, "the tagged sessions", func(sn Snapshot) bool {
		return countActive(sn, acme) == 1
	})
	stop()
	active.wait(t)
	atx.Rollback(context.Background())

	a, _ := byPID(snap, active.pid)
	if a.Tenant != acme || a.Tier != tenant.T1 || a.Application != svc || !a.SessionTagged || strings.Contains(a.Query, "/*") {
		t.Errorf("active session: %+v", a)
	}
	b, ok := byPID(snap, idle.pid)
	if !ok || b.Tenant != long || b.Tier != tenant.T3 || b.Application != svc || b.State != StateIdleInTransaction {
		t.Errorf("idle session: %+v", b)
	}
	// Without the names the id stands for the tenant.
	snap, err = NewSampler(newPool(t, "", "")).Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := byPID(snap, idle.pid); b.Tenant != sqlcomment.TenantID(long) {
		t.Errorf("without names: %q", b.Tenant)
	}
	agg := NewAggregator()
	agg.Add(Snapshot{Time: snap.Time, Backends: []Backend{a}})
	w := agg.Cut(snap.Time)
	if len(w.Tenants) != 1 || w.Tenants[0].Tenant != acme || w.Tenants[0].AAS != 1 {
		t.Errorf("window: %+v", w.Tenants)
	}
}

// TestSetSessionTags: the comment wins over application_name; names that
// are not session tags are left alone.
func TestSetSessionTags(t *testing.T) {
	for _, c := range []struct {
		app, query  string
		tenant, svc string
		tier        tenant.Tier
		session     bool
	}{
		{"svc|t=acme|T2", "SELECT 1", "acme", "svc", tenant.T2, true},
		{"svc|t=acme|T2", "SELECT 1 /*tenant='beta',tier='T1'*/", "beta", "svc", tenant.T1, true},
		{"svc|t=acme", "SELECT 1 /*tenant='beta'*/", "beta", "svc", tenant.TierUnset, true},
		// A tenant named like the overflow row, from either door, is
		// counted under its stand-in.
		{"svc|t=other", "SELECT 1", tenant.Escape(tenant.Other), "svc", tenant.TierUnset, true},
		{"svc|t=acme", "SELECT 1 /*tenant='other'*/", tenant.Escape(tenant.Other), "svc", tenant.TierUnset, true},
		{"psql", "SELECT 1", "", "psql", tenant.TierUnset, false},
		{"svc|t=(untagged)", "SELECT 1", "", "svc|t=(untagged)", tenant.TierUnset, false},
		{"|t=acme", "SELECT 1 /*application='web'*/", "acme", "web", tenant.TierUnset, true},
	} {
		b := Backend{Application: c.app, Query: c.query}
		b.setTags()
		b.setSessionTags(nil)
		if b.Tenant != c.tenant || b.Application != c.svc || b.Tier != c.tier || b.SessionTagged != c.session {
			t.Errorf("%q %q: %+v", c.app, c.query, b)
		}
	}
	// The SET LOCAL sent before a statement without arguments, in its
	// simple query, is not the statement: the same statement sent with
	// arguments has the same fingerprint.
	b := Backend{Application: "svc|t=acme|T2", Query: "SET LOCAL application_name = 'svc|t=acme|T2'; SELECT pg_sleep(1)"}
	b.setTags()
	b.setSessionTags(nil)
	if b.Query != "SELECT pg_sleep(1)" || Fingerprint(b.Query) != Fingerprint("SELECT pg_sleep($1)") {
		t.Errorf("query %q, fingerprint %q", b.Query, Fingerprint(b.Query))
	}
	// Another name's SET LOCAL is the application's own statement.
	b = Backend{Application: "svc|t=acme|T2", Query: "SET LOCAL application_name = 'x'; SELECT 1"}
	b.setSessionTags(nil)
	if b.Query != "SET LOCAL application_name = 'x'; SELECT 1" {
		t.Errorf("query %q", b.Query)
	}
}

// TestSessionIDNamedFromComments: without WithTenantNames (qtop
// --postgres alone, no collector to map the ids back) a session tagged
// with a long tenant's short id counts under the tenant's name once a
// statement commented with that name has been sampled, in the same
// sample or an earlier one: the tenant is one row, not its id and its
// name apart. An id that no comment has named stays the id. The sessions
// are idle in their transactions, so every sample sees them as they are.
func TestSessionIDNamedFromComments(t *testing.T) {
	sfx := suffix(t)
	long, unnamed := strings.Repeat("ü", 25)+sfx, strings.Repeat("ö", 25)+sfx
	ctx := context.Background()
	begin := func(name string) *session { return beginTagged(t, sfx, name) }
	byID, byIDUnnamed := begin(long), begin(unnamed)
	commented := connect(t)
	tx, err := commented.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, tagged("SELECT 1", long, "r")); err != nil {
		t.Fatal(err)
	}
	check := func(step string, snap Snapshot, s *session, want string) {
		t.Helper()
		if b, ok := byPID(snap, s.pid); !ok || b.Tenant != want {
			t.Errorf("%s: session %d under %q, want %q", step, s.pid, b.Tenant, want)
		}
	}
	pool := newPool(t, "", "")
	s := NewSampler(pool)
	snap, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("same sample", snap, byID, long)
	check("same sample", snap, commented, long)
	check("same sample", snap, byIDUnnamed, sqlcomment.TenantID(unnamed))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if snap, err = s.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	check("the comment gone", snap, byID, long)
	if snap, err = NewSampler(pool).Sample(ctx); err != nil {
		t.Fatal(err)
	}
	check("a sampler that never saw the comment", snap, byID, sqlcomment.TenantID(long))
}

// TestSessionIDNotARealTenant: a tenant whose real name is another
// tenant's session id (sqlcomment.TenantID) is never counted under that
// id, whether it arrives in application_name or in a comment: an id in a
// row is always an id, and the real tenant counts under its stand-in
// (tenant.Escape).
func TestSessionIDNotARealTenant(t *testing.T) {
	sfx := suffix(t)
	unnamed := strings.Repeat("ö", 25) + sfx
	id := sqlcomment.TenantID(unnamed)
	ctx := context.Background()
	begin := func(name string) *session { return beginTagged(t, sfx, name) }
	byID, named := begin(unnamed), begin(id)
	commented := connect(t)
	tx, err := commented.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, tagged("SELECT 1", id, "r")); err != nil {
		t.Fatal(err)
	}
	snap, err := NewSampler(newPool(t, "", "")).Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	under := func(s *session) string {
		b, _ := byPID(snap, s.pid)
		return b.Tenant
	}
	if got := under(byID); got != id {
		t.Errorf("the unresolved session under %q, want its id %q", got, id)
	}
	for _, s := range []*session{named, commented} {
		if got := under(s); got == id || got != tenant.Escape(id) {
			t.Errorf("the tenant really named %q (session %d) under %q: want its stand-in, apart from the id's row", id, s.pid, got)
		}
	}
}

// beginTagged opens a session and begins a transaction in it, tagged in
// application_name (sqlcomment.ModeSession) with tenant name of tier T2,
// rolled back when the test ends.
func beginTagged(t *testing.T, sfx, name string) *session {
	t.Helper()
	ctx := context.Background()
	opts := []sqlcomment.Option{sqlcomment.WithApplication("svc-" + sfx), sqlcomment.WithMode(sqlcomment.ModeSession)}
	s := connect(t)
	tx, err := pgxcomment.Wrap(s.conn, opts...).Begin(tenant.With(ctx, tenant.Tags{Tenant: name, Tier: tenant.T2}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	return s
}
