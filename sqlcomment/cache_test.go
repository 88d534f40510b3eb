package sqlcomment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/tenant"
)

// want is the comment the Commenter must write for the static tags and t,
// computed through Append: the map path, which shares no code with the
// Commenter's cache.
func want(query string, t tenant.Tags) string {
	m := map[string]string{KeyApplication: "api", KeyDBDriver: "pgx/v5"}
	if t.Route != "" {
		m[KeyRoute] = t.Route
	}
	if t.Tenant != "" {
		m[KeyTenant] = t.Tenant
	}
	if t.Tier != tenant.TierUnset {
		m[KeyTier] = t.Tier.String()
	}
	return Append(query, m)
}

// TestCacheHitsEqualMisses: every configuration gives the same statement on
// its first call (a miss) as on later ones (hits, once admitted), and the
// later ones do come from the cache.
func TestCacheHitsEqualMisses(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("congo=t61rcWkgMzE")
	span := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceState: ts}))
	spanNoState := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	tags := []tenant.Tags{
		{Tenant: "acme", Route: "GET /r", Tier: tenant.T2},
		{Tenant: "acme"},
		{Route: "GET /r"},
		{Tier: tenant.T0},
		{},
		{Tenant: "it's */ DROP TABLE t; --", Route: "\x00\n\\", Tier: tenant.T3},
		{Tenant: strings.Repeat("x", 2000)}, // over the cap: never cached
		{Tenant: "acme", Key: "user:42"},
	}
	opts := [][]Option{
		nil,
		{WithApplication("api"), WithDBDriver("pgx/v5")},
		{WithApplication("api"), WithTraceContext()},
		{WithKey()},
		{WithMaxLen(100)},
		{WithMaxLen(100), WithTraceContext()},
		{WithTraceContext()},
	}
	queries := []string{"SELECT 1", "SELECT 1;  ", "SELECT 1 -- note", "", "SELECT 'open"}
	for oi, o := range opts {
		for _, tg := range tags {
			for _, base := range []context.Context{context.Background(), span, spanNoState} {
				ctx := tenant.With(base, tg)
				for _, q := range queries {
					for _, prepare := range []bool{false, true} {
						first := NewCommenter(o...).Comment(ctx, q, prepare)
						c := NewCommenter(o...)
						for i := range 4 {
							got := c.Comment(ctx, q, prepare)
							if got != first {
								t.Fatalf("opts %d, tags %+v, %q, prepare=%v, call %d:\n got %+v\nwant %+v", oi, tg, q, prepare, i, got, first)
							}
						}
						// Cached: short tags on a statement that gets a
						// comment; never a key or a value over the cap.
						_, _, e := c.cache.lookup(tg)
						commented := q == "SELECT 1" || q == "SELECT 1;  "
						switch {
						case tg.Tenant == "acme" && tg.Key == "" && commented && e == nil:
							t.Errorf("opts %d, tags %+v, %q: not cached", oi, tg, q)
						case (len(tg.Tenant) > 1000 || (tg.Key != "" && oi == 3) || !commented) && e != nil:
							t.Errorf("opts %d, tags %+v, %q: cached", oi, tg, q)
						}
					}
				}
			}
		}
	}
}

// TestCacheManyTenants: tenants far more than slots, in an order that
// repeats some back to back (admitted) and evicts them again; every
// statement carries its own tenant.
func TestCacheManyTenants(t *testing.T) {
	c := NewCommenter(WithApplication("api"), WithDBDriver("pgx/v5"))
	rng := rand.New(rand.NewPCG(1, 2))
	const q = "SELECT * FROM orders WHERE id = $1"
	for i := range 60000 {
		n := rng.IntN(5000)
		if i%3 == 1 {
			n = rng.IntN(20) // a few busy tenants
		}
		tg := tenant.Tags{Tenant: fmt.Sprintf("tenant-%d", n), Route: fmt.Sprintf("GET /r/%d", n%7), Tier: tenant.Tier(1 + n%4)}
		for range 1 + i%2 {
			got := c.Comment(tenant.With(context.Background(), tg), q, false).Query
			if w := want(q, tg); got != w {
				t.Fatalf("call %d: got %q, want %q", i, got, w)
			}
		}
	}
}

// TestPosCache: texts of the same length at new addresses each time,
// texts that differ only where a comment starts, and constants: the
// remembered insert position is always the position of this very text.
func TestPosCache(t *testing.T) {
	c := NewCommenter(WithApplication("api"), WithDBDriver("pgx/v5"))
	tg := tenant.Tags{Tenant: "acme", Route: "GET /r", Tier: tenant.T1}
	ctx := tenant.With(context.Background(), tg)
	texts := []string{"SELECT 1", "SELECT 1;", "SELECT 'a--'", "SELECT 'a'--", "SELECT $1 ", "SELECT $a$"}
	for i := range 5000 {
		// A fresh copy (new address) most of the time, the same one
		// otherwise; same lengths, different lexing.
		q := texts[i%len(texts)]
		if i%5 != 0 {
			q = strings.Clone(q)
		}
		got := c.Comment(ctx, q, false).Query
		if w := want(q, tg); got != w {
			t.Fatalf("call %d: got %q, want %q", i, got, w)
		}
	}
	long := "SELECT " + strings.Repeat("1+", posMaxQuery) + "1"
	for range 3 {
		if got := c.Comment(ctx, long, false).Query; got != want(long, tg) {
			t.Fatal("long text")
		}
	}
}

// TestCacheConcurrent: goroutines share a Commenter (run with -race).
func TestCacheConcurrent(t *testing.T) {
	c := NewCommenter(WithApplication("api"), WithDBDriver("pgx/v5"))
	queries := make([]string, 40)
	for i := range queries {
		queries[i] = fmt.Sprintf("SELECT * FROM t%d WHERE id = $1", i)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 3000 {
				n := rng.IntN(3000)
				tg := tenant.Tags{Tenant: fmt.Sprintf("t%d", n%50+n/2950*1000), Route: "GET /x", Tier: tenant.T2}
				q := queries[rng.IntN(len(queries))]
				if got := c.Comment(tenant.With(context.Background(), tg), q, false).Query; got != want(q, tg) {
					t.Errorf("got %q, want %q", got, want(q, tg))
					return
				}
			}
		}()
	}
	wg.Wait()
}
