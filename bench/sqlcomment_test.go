package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gcore "github.com/google/sqlcommenter/go/core"
	gsql "github.com/google/sqlcommenter/go/database/sql"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// sqlcomment against github.com/google/sqlcommenter/go/database/sql v0.1.1
// (+ go/core v0.1.2), same number of tags (6), over a driver that does
// nothing, so that only the commenting is measured.

// lastQuery is a no-op driver that remembers the last statement text and
// supports BeginTx options.
type lastQuery struct {
	mu sync.Mutex
	q  string
}

func (l *lastQuery) set(q string) { l.mu.Lock(); l.q = q; l.mu.Unlock() }
func (l *lastQuery) get() string  { l.mu.Lock(); defer l.mu.Unlock(); return l.q }

type scDriver struct{ last *lastQuery }
type scConn struct{ last *lastQuery }
type scRows struct{ n int }
type scTx struct{}

func (d scDriver) Open(string) (driver.Conn, error)                           { return scConn(d), nil }
func (c scConn) Prepare(string) (driver.Stmt, error)                          { return nil, fmt.Errorf("no prepare") }
func (c scConn) Close() error                                                 { return nil }
func (c scConn) Begin() (driver.Tx, error)                                    { return scTx{}, nil }
func (c scConn) CheckNamedValue(*driver.NamedValue) error                     { return nil }
func (c scConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) { return scTx{}, nil }
func (c scConn) ExecContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Result, error) {
	if c.last != nil {
		c.last.set(q)
	}
	return driver.RowsAffected(1), nil
}
func (c scConn) QueryContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Rows, error) {
	if c.last != nil {
		c.last.set(q)
	}
	return &scRows{n: 1}, nil
}
func (*scRows) Columns() []string { return []string{"x"} }
func (*scRows) Close() error      { return nil }
func (r *scRows) Next(dest []driver.Value) error {
	if r.n == 0 {
		return io.EOF
	}
	r.n--
	dest[0] = int64(1)
	return nil
}
func (scTx) Commit() error   { return nil }
func (scTx) Rollback() error { return nil }

type scConnector struct{ d scDriver }

func (c scConnector) Connect(context.Context) (driver.Conn, error) { return scConn(c.d), nil }
func (c scConnector) Driver() driver.Driver                        { return c.d }

var registerOnce sync.Once

const scDriverName = "bench-sqlcomment-noop"

func registerSC(last *lastQuery) {
	registerOnce.Do(func() { sql.Register(scDriverName, switchDriver{}) })
	switchMu.Lock()
	switchLast = last
	switchMu.Unlock()
}

// switchDriver is the driver the peer opens by name; it hands out
// connections that record into the current test's lastQuery.
type switchDriver struct{}

var (
	switchMu   sync.Mutex
	switchLast *lastQuery
)

func (switchDriver) Open(string) (driver.Conn, error) {
	switchMu.Lock()
	defer switchMu.Unlock()
	return scConn{last: switchLast}, nil
}

func spanContext() context.Context {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// qtopDB: application, db_driver, route, tenant, tier, traceparent.
func qtopDB(last *lastQuery) (*sql.DB, context.Context) {
	db := sql.OpenDB(sqlcomment.WrapConnector(scConnector{scDriver{last}},
		sqlcomment.WithApplication("billing-api"), sqlcomment.WithDBDriver("pgx"), sqlcomment.WithTraceContext()))
	ctx := tenant.With(spanContext(), tenant.Tags{Tenant: "acme-corp", Route: "GET /v1/reports", Tier: tenant.T2})
	return db, ctx
}

// googleDB: action, application, db_driver, framework, route, traceparent.
func googleDB(tb testing.TB, last *lastQuery) (*sql.DB, context.Context) {
	registerSC(last)
	db, err := gsql.Open(scDriverName, "", gcore.CommenterOptions{
		Config: gcore.CommenterConfig{EnableDBDriver: true, EnableRoute: true, EnableFramework: true,
			EnableAction: true, EnableTraceparent: true, EnableApplication: true},
		Tags: gcore.StaticTags{Application: "billing-api", DriverName: "pgx"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := spanContext()
	ctx = context.WithValue(ctx, gcore.Route, "GET /v1/reports")
	ctx = context.WithValue(ctx, gcore.Action, "acme-corp")
	ctx = context.WithValue(ctx, gcore.Framework, "net/http")
	return db, ctx
}

var sixTags = map[string]string{
	"application": "billing-api",
	"db_driver":   "pgx",
	"route":       "GET /v1/reports",
	"tenant":      "acme-corp",
	"tier":        "T2",
	"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}

var scSink string

// scInterleave runs batches of each f in turn, so that all see the same
// machine load, and returns the median ns/op of each over the batches.
func scInterleave(b *testing.B, fs ...func()) []float64 {
	const batch = 32
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

// BenchmarkSQLComment: each family has plain sub-benchmarks (ns/op and
// allocations, -benchmem) and an Interleaved one that runs the contenders
// in the same loop and reports their ratio, which is what survives a
// noisy machine.
func BenchmarkSQLComment(b *testing.B) {
	b.Run("Format/qtop", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scSink = sqlcomment.Format(sixTags)
		}
	})
	b.Run("Format/google-core", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scSink = "/*" + gcore.ConvertMapToComment(sixTags) + "*/"
		}
	})
	b.Run("Format/Interleaved", func(b *testing.B) {
		m := scInterleave(b,
			func() { scSink = sqlcomment.Format(sixTags) },
			func() { scSink = "/*" + gcore.ConvertMapToComment(sixTags) + "*/" })
		b.ReportMetric(m[0], "qtop-ns")
		b.ReportMetric(m[1], "google-ns")
		b.ReportMetric(m[1]/m[0], "speedup")
	})

	rawDB := sql.OpenDB(scConnector{})
	defer rawDB.Close()
	qDB, qCtx := qtopDB(nil)
	defer qDB.Close()
	gDB, gCtx := googleDB(b, nil)
	defer gDB.Close()
	exec := func(db *sql.DB, ctx context.Context) func() {
		return func() {
			if _, err := db.ExecContext(ctx, "UPDATE invoices SET paid = true WHERE id = $1", 7); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name string
		db   *sql.DB
		ctx  context.Context
	}{{"raw", rawDB, context.Background()}, {"qtop", qDB, qCtx}, {"google", gDB, gCtx}} {
		b.Run("Exec/"+c.name, func(b *testing.B) {
			f := exec(c.db, c.ctx)
			b.ReportAllocs()
			for b.Loop() {
				f()
			}
		})
	}
	b.Run("Exec/Interleaved", func(b *testing.B) {
		m := scInterleave(b, exec(rawDB, context.Background()), exec(qDB, qCtx), exec(gDB, gCtx))
		b.ReportMetric(m[0], "raw-ns")
		b.ReportMetric(m[1], "qtop-ns")
		b.ReportMetric(m[2], "google-ns")
		b.ReportMetric(m[2]/m[1], "speedup")
		b.ReportMetric((m[2]-m[0])/(m[1]-m[0]), "overhead-speedup")
	})
}

// TestSQLCommentAgainstGoogle shows the differences the issue names: the
// peer writes '+' for a space, comments statements that already have a
// comment, and drops BeginTx options; qtop does none of these.
func TestSQLCommentAgainstGoogle(t *testing.T) {
	ql, gl := &lastQuery{}, &lastQuery{}
	qdb, qctx := qtopDB(ql)
	defer qdb.Close()
	gdb, gctx := googleDB(t, gl)
	defer gdb.Close()

	qdb.ExecContext(qctx, "SELECT 1")
	gdb.ExecContext(gctx, "SELECT 1")
	if !strings.Contains(ql.get(), "route='GET%20%2Fv1%2Freports'") {
		t.Errorf("qtop: %s", ql.get())
	}
	if !strings.Contains(gl.get(), "route='GET+%2Fv1%2Freports'") {
		t.Errorf("google no longer writes '+' for a space: %s", gl.get())
	}

	const commented = "SELECT 1 /* hint */"
	qdb.ExecContext(qctx, commented)
	gdb.ExecContext(gctx, commented)
	if ql.get() != commented {
		t.Errorf("qtop changed a commented statement: %s", ql.get())
	}
	if strings.Count(gl.get(), "/*") != 2 {
		t.Errorf("google no longer adds a second comment: %s", gl.get())
	}

	opts := &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}
	if tx, err := qdb.BeginTx(qctx, opts); err != nil {
		t.Errorf("qtop BeginTx: %v", err)
	} else {
		tx.Rollback()
	}
	if tx, err := gdb.BeginTx(gctx, opts); err == nil {
		tx.Rollback()
		t.Error("google now forwards BeginTx")
	} else {
		t.Logf("google's wrapper over a driver with BeginTx: %v", err)
	}
}
