package sqlcomment

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

var sixTags = map[string]string{
	"application": "billing-api",
	"db_driver":   "pgx/v5",
	"route":       "GET /v1/reports/{id}",
	"tenant":      "acme-corp",
	"tier":        "T2",
	"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}

var sink string

func BenchmarkFormat6(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sink = Format(sixTags)
	}
}

func BenchmarkAppend6(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sink = Append("SELECT id, total FROM invoices WHERE customer_id = $1", sixTags)
	}
}

func BenchmarkParse6(b *testing.B) {
	q := Append("SELECT id, total FROM invoices WHERE customer_id = $1", sixTags)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCommenter(b *testing.B) {
	c := NewCommenter(WithApplication("billing-api"), WithDBDriver("pgx/v5"))
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme-corp", Route: "GET /v1/reports/{id}", Tier: tenant.T2})
	b.ReportAllocs()
	for b.Loop() {
		sink = c.Comment(ctx, "SELECT id, total FROM invoices WHERE customer_id = $1", false).Query
	}
}

// BenchmarkCommenterTenants: 10,000 tenants in turn, so that the comment
// cache never hits and every comment is encoded (BenchmarkCommenter is the
// other end: one busy tenant, every comment from the cache).
func BenchmarkCommenterTenants(b *testing.B) {
	c := NewCommenter(WithApplication("billing-api"), WithDBDriver("pgx/v5"))
	ctxs := tenantContexts(10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink = c.Comment(ctxs[i], "SELECT id, total FROM invoices WHERE customer_id = $1", false).Query
		i++
		if i == len(ctxs) {
			i = 0
		}
	}
}

// tenantContexts returns n contexts, each with a tenant of its own and the
// benchmarks' route and tier.
func tenantContexts(n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = tenant.With(context.Background(), tenant.Tags{Tenant: fmt.Sprintf("tenant-%05d", i), Route: "GET /v1/reports/{id}", Tier: tenant.T2})
	}
	return ctxs
}

// noop is a driver that does nothing, to measure the wrapper's own cost.
type noopDriver struct{}
type noopConn struct{}
type noopRows struct{ n int }

func (noopDriver) Open(string) (driver.Conn, error)       { return noopConn{}, nil }
func (noopConn) Prepare(string) (driver.Stmt, error)      { return nil, driver.ErrSkip }
func (noopConn) Close() error                             { return nil }
func (noopConn) Begin() (driver.Tx, error)                { return nil, driver.ErrSkip }
func (noopConn) CheckNamedValue(*driver.NamedValue) error { return nil }
func (*noopRows) Columns() []string                       { return []string{"x"} }
func (*noopRows) Close() error                            { return nil }
func (r *noopRows) Next(dest []driver.Value) error {
	if r.n == 0 {
		return io.EOF
	}
	r.n--
	dest[0] = int64(1)
	return nil
}
func (noopConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}
func (noopConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return &noopRows{n: 1}, nil
}

type noopConnector struct{}

func (noopConnector) Connect(context.Context) (driver.Conn, error) { return noopConn{}, nil }
func (noopConnector) Driver() driver.Driver                        { return noopDriver{} }

// benchDB runs the wrapper overhead benchmarks: raw is the driver alone,
// tagged the wrapper with a tenant, a route, a tier and two static tags.
func benchDB(b *testing.B, wrap bool, opts ...Option) (*sql.DB, context.Context) {
	var c driver.Connector = noopConnector{}
	ctx := context.Background()
	if wrap {
		c = WrapConnector(c, append([]Option{WithApplication("billing-api"), WithDBDriver("pgx/v5")}, opts...)...)
		ctx = tenant.With(ctx, tenant.Tags{Tenant: "acme-corp", Route: "GET /v1/reports/{id}", Tier: tenant.T2})
	}
	db := sql.OpenDB(c)
	db.SetMaxIdleConns(2)
	b.Cleanup(func() { db.Close() })
	return db, ctx
}

func benchExec(b *testing.B, db *sql.DB, ctx context.Context) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := db.ExecContext(ctx, "UPDATE invoices SET paid = true WHERE id = $1", 7); err != nil {
			b.Fatal(err)
		}
	}
}

func benchQuery(b *testing.B, db *sql.DB, ctx context.Context) {
	b.ReportAllocs()
	var x int64
	for b.Loop() {
		rows, err := db.QueryContext(ctx, "SELECT total FROM invoices WHERE id = $1", 7)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			rows.Scan(&x)
		}
		rows.Close()
	}
}

func BenchmarkExecRaw(b *testing.B)     { db, ctx := benchDB(b, false); benchExec(b, db, ctx) }
func BenchmarkExecTagged(b *testing.B)  { db, ctx := benchDB(b, true); benchExec(b, db, ctx) }
func BenchmarkQueryRaw(b *testing.B)    { db, ctx := benchDB(b, false); benchQuery(b, db, ctx) }
func BenchmarkQueryTagged(b *testing.B) { db, ctx := benchDB(b, true); benchQuery(b, db, ctx) }

func BenchmarkExecTaggedObserved(b *testing.B) {
	db, ctx := benchDB(b, true, WithObserver(func(context.Context, Event) {}))
	benchExec(b, db, ctx)
}

func BenchmarkQueryTaggedObserved(b *testing.B) {
	db, ctx := benchDB(b, true, WithObserver(func(context.Context, Event) {}))
	benchQuery(b, db, ctx)
}

// interleave runs batches of each f in turn, so that all see the same
// machine load, and returns the median ns/op of each over the batches. The
// machines these run on are shared and noisy; ratios and differences from
// one interleaved run are what can be compared.
func interleave(b *testing.B, fs ...func()) []float64 {
	const batch = 64
	samples := make([][]float64, len(fs))
	for b.Loop() {
		for i, f := range fs {
			t0 := time.Now()
			for range batch {
				f()
			}
			samples[i] = append(samples[i], float64(time.Since(t0))/batch)
		}
	}
	med := make([]float64, len(fs))
	for i, s := range samples {
		slices.Sort(s)
		med[i] = s[len(s)/2]
	}
	return med
}

// BenchmarkOverhead reports the wrapper's cost per statement over the raw
// fake driver (overhead-ns = median tagged − median raw), for ExecContext
// and QueryContext, with a tenant, a route, a tier and two static tags.
func BenchmarkOverhead(b *testing.B) {
	rawDB, rawCtx := benchDB(b, false)
	tagDB, tagCtx := benchDB(b, true)
	obsDB, obsCtx := benchDB(b, true, WithObserver(func(context.Context, Event) {}))
	exec := func(db *sql.DB, ctx context.Context) func() {
		return func() {
			if _, err := db.ExecContext(ctx, "UPDATE invoices SET paid = true WHERE id = $1", 7); err != nil {
				b.Fatal(err)
			}
		}
	}
	query := func(db *sql.DB, ctx context.Context) func() {
		return func() {
			rows, err := db.QueryContext(ctx, "SELECT total FROM invoices WHERE id = $1", 7)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
		}
	}
	b.Run("Exec", func(b *testing.B) {
		m := interleave(b, exec(rawDB, rawCtx), exec(tagDB, tagCtx), exec(obsDB, obsCtx))
		b.ReportMetric(m[0], "raw-ns")
		b.ReportMetric(m[1]-m[0], "overhead-ns")
		b.ReportMetric(m[2]-m[0], "observed-overhead-ns")
	})
	b.Run("Query", func(b *testing.B) {
		m := interleave(b, query(rawDB, rawCtx), query(tagDB, tagCtx), query(obsDB, obsCtx))
		b.ReportMetric(m[0], "raw-ns")
		b.ReportMetric(m[1]-m[0], "overhead-ns")
		b.ReportMetric(m[2]-m[0], "observed-overhead-ns")
	})
	// The same Exec with 10,000 tenants in turn: no comment comes from the
	// cache, every one is encoded.
	b.Run("ExecTenants", func(b *testing.B) {
		ctxs := tenantContexts(10000)
		i := 0
		cycling := func() {
			exec(tagDB, ctxs[i])()
			if i++; i == len(ctxs) {
				i = 0
			}
		}
		m := interleave(b, exec(rawDB, rawCtx), cycling)
		b.ReportMetric(m[0], "raw-ns")
		b.ReportMetric(m[1]-m[0], "overhead-ns")
	})
}

// naiveFormat is the straightforward builder PEERS.md measures (sort the
// keys, url.PathEscape, strings.Builder), with the same output for these
// tags: a yardstick run beside Format in the same loop.
func naiveFormat(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString("/*")
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(url.PathEscape(k))
		sb.WriteString("='")
		sb.WriteString(strings.ReplaceAll(url.PathEscape(tags[k]), "'", `\'`))
		sb.WriteByte('\'')
	}
	sb.WriteString("*/")
	return sb.String()
}

// floorFormat does what any Format of a map must at least do, and nothing
// more: range over the map, copy each key and value (neither sorted nor
// encoded) and allocate the result once. It is not a comment; it is the
// floor under Format's time on the machine at hand.
func floorFormat(tags map[string]string) string {
	var buf [256]byte
	i := 0
	for k, v := range tags {
		i += copy(buf[i:], k)
		i += copy(buf[i:], v)
	}
	return string(buf[:i])
}

// BenchmarkFormatVsNaive runs Format, a straightforward builder and the
// floor in the same loop: floor-ns is what reading the map and allocating
// the string cost here before any sorting or encoding, so format-ns
// over floor-ns is what Format itself adds.
func BenchmarkFormatVsNaive(b *testing.B) {
	m := interleave(b, func() { sink = Format(sixTags) }, func() { sink = naiveFormat(sixTags) },
		func() { sink = floorFormat(sixTags) })
	b.ReportMetric(m[0], "format-ns")
	b.ReportMetric(m[1], "naive-ns")
	b.ReportMetric(m[2], "floor-ns")
	b.ReportMetric(m[1]/m[0], "speedup")
	b.ReportMetric(m[0]/m[2], "format-vs-floor")
}

// BenchmarkBudgetAdmit is the budget check on the statement path: an
// "each tenant" budget with share, concurrency and cap, over 10,000
// tenants (10,000 budget keys) in turn, plus a runaway rule that does
// not match; Admit and Finish per op.
func BenchmarkBudgetAdmit(b *testing.B) {
	bs := NewBudgets()
	if err := bs.Set([]policy.Budget{{ID: "each", Each: "tenant", Share: 1000, Concurrency: 1000,
		MaxStatementSeconds: 10, Mode: policy.Enforce, ConfirmBroad: true, Reason: "bench"}},
		[]policy.Runaway{{ID: "r", Match: []map[string]string{{"route": "/none"}}, AfterSeconds: 1, Action: policy.Cancel, Reason: "bench"}}); err != nil {
		b.Fatal(err)
	}
	const keys = 10000
	tags := make([]tenant.Tags, keys)
	for i := range tags {
		tags[i] = tenant.Tags{Tenant: fmt.Sprintf("tenant-%05d", i), Route: "/api/orders"}
	}
	cfg := &config{application: "bench"}
	const q = "SELECT id, total FROM orders WHERE tenant_id = $1 AND id = $2"
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range keys { // every key exists: the steady state
		tk, _ := bs.Admit(now, &tags[i], cfg, q, false)
		bs.Finish(&tk, now, time.Millisecond, false)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Microsecond)
		tk, err := bs.Admit(now, &tags[i%keys], cfg, q, false)
		if err != nil {
			b.Fatal(err)
		}
		bs.Finish(&tk, now, time.Millisecond, false)
	}
	if got := len(bs.cur.Load().all[0].st.keys); got != keys {
		b.Fatalf("%d keys, want %d", got, keys)
	}
}

// BenchmarkShape is the statement shape of a budgeted statement.
func BenchmarkShape(b *testing.B) {
	const q = "SELECT id, total FROM orders WHERE tenant_id = $1 AND id = $2"
	b.ReportAllocs()
	var h uint64
	for b.Loop() {
		h += Shape(q)
	}
	_ = h
}

// BenchmarkExecTaggedBudgeted is BenchmarkExecTagged with an Enforce
// budget that matches (share, cap, concurrency): the wrapper's cost of
// the budget check on a no-op driver.
func BenchmarkExecTaggedBudgeted(b *testing.B) {
	bs := NewBudgets()
	if err := bs.Set([]policy.Budget{{ID: "each", Each: "tenant", Share: 1000, Concurrency: 1000,
		MaxStatementSeconds: 10, Mode: policy.Enforce, ConfirmBroad: true, Reason: "bench"}}, nil); err != nil {
		b.Fatal(err)
	}
	db, ctx := benchDB(b, true, WithBudgets(bs))
	benchExec(b, db, ctx)
}
