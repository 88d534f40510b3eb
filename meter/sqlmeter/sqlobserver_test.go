package sqlmeter

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/baggage"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// TestSQLObserverEvents feeds the observer the events the sqlcomment
// wrapper emits; the wrapper itself over the real PostgreSQL is in
// TestPostgresDBTimePerTenant.
func TestSQLObserverEvents(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	obs := mustSQLObserver(rec)
	acme := tenant.Tags{Tenant: "acme", Route: "GET /a", Tier: tenant.T1}
	ctx := context.Background()

	obs(ctx, sqlcomment.Event{Tags: acme, Tagged: true, Op: sqlcomment.OpQuery, Start: t0, Duration: 20 * time.Millisecond, Rows: 5})
	obs(ctx, sqlcomment.Event{Tags: acme, Tagged: true, Op: sqlcomment.OpExec, Start: t0, Duration: 10 * time.Millisecond, Rows: -1, Err: errors.New("deadlock")})
	obs(ctx, sqlcomment.Event{Tags: acme, Tagged: true, Op: sqlcomment.OpCommit, Start: t0, Duration: 3 * time.Millisecond, Rows: -1})
	obs(ctx, sqlcomment.Event{Tags: acme, Tagged: true, Op: sqlcomment.OpPing, Start: t0, Duration: time.Second})
	// The event's tags are what the wrapper found (tenant.Lookup, the
	// comment's): the observer does not look in the context again, so a
	// context whose baggage names another tenant does not split them.
	m, _ := baggage.NewMemberRaw("tenant.id", "initech")
	bg, _ := baggage.New(m)
	globex := tenant.Tags{Tenant: "globex"}
	obs(baggage.ContextWithBaggage(ctx, bg), sqlcomment.Event{Tags: globex, Tagged: true, Op: sqlcomment.OpQuery, Start: t0, Duration: 7 * time.Millisecond})
	// No tenant anywhere.
	obs(ctx, sqlcomment.Event{Op: sqlcomment.OpQuery, Start: t0, Duration: time.Millisecond})

	got := rowsByKey(rec.Cut(t0.Add(time.Second)))
	a := got["acme|GET /a|db"]
	if len(got) != 3 || a.Count != 3 || a.Errors != 1 || a.Duration != 33*time.Millisecond || a.Rows != 5 || a.Tier != tenant.T1 {
		t.Errorf("rows %+v", got)
	}
	if g := got["globex||db"]; g.Count != 1 || g.Duration != 7*time.Millisecond {
		t.Errorf("baggage tenant: %+v", g)
	}
	if u := got["(untagged)||db"]; u.Count != 1 {
		t.Errorf("untagged: %+v", u)
	}
}

func BenchmarkSQLObserver(b *testing.B) {
	rec := mustRecorder(fixedClock(t0))
	obs := mustSQLObserver(rec)
	e := sqlcomment.Event{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Tagged: true, Op: sqlcomment.OpQuery,
		Start: t0, Duration: time.Millisecond, Rows: 1}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		obs(ctx, e)
	}
}

func TestSQLObserverNilRecorder(t *testing.T) {
	if o, err := SQLObserver(nil); !errors.Is(err, meter.ErrInvalid) || o != nil {
		t.Errorf("SQLObserver(nil) = %v; want meter.ErrInvalid", err)
	}
}
