package sqlcomment

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"go.opentelemetry.io/otel/baggage"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/qtop-dev/qtop/tenant"
)

var acme = tenant.Tags{Tenant: "acme", Route: "GET /reports", Tier: tenant.T1}

// scenario exercises every part of database/sql a driver can change, and
// returns what the program sees.
func scenario(t *testing.T, db *sql.DB) []string {
	t.Helper()
	db.SetMaxOpenConns(1)
	var out []string
	rec := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	ctx := tenant.With(context.Background(), acme)

	rec("ping %v", db.PingContext(ctx))
	res, err := db.ExecContext(ctx, "UPDATE t SET a = $1, b = $2", money(7), 5)
	rec("exec %v %v", affected(res), err)
	_, err = db.ExecContext(ctx, "UPDATE t SET a = :n", sql.Named("n", 1))
	rec("named %v", err)
	_, err = db.ExecContext(ctx, "UPDATE FAIL")
	rec("exec fail %v", err)
	res, err = db.ExecContext(ctx, "UPDATE SKIP SET a = $1", money(1))
	rec("exec skip %v %v", affected(res), err)

	readRows := func(name string, rows *sql.Rows, err error) {
		if err != nil {
			rec("%s %v", name, err)
			return
		}
		cts, err := rows.ColumnTypes()
		rec("%s column types %v", name, err)
		for _, ct := range cts {
			l, lok := ct.Length()
			n, nok := ct.Nullable()
			p, s, dok := ct.DecimalSize()
			rec("  %s %v %q %d %v %v %v %d %d %v", ct.Name(), ct.ScanType(), ct.DatabaseTypeName(), l, lok, n, nok, p, s, dok)
		}
		for set := 0; ; set++ {
			for rows.Next() {
				var id int64
				var nm string
				rec("  set %d row %v %s", set, rows.Scan(&id, &nm), fmt.Sprint(id, nm))
			}
			if !rows.NextResultSet() {
				break
			}
		}
		rec("  err %v close %v", rows.Err(), rows.Close())
	}
	rows, err := db.QueryContext(ctx, "SELECT id, name FROM t WHERE a = $1", money(2))
	readRows("query", rows, err)
	rows, err = db.QueryContext(ctx, "SELECT SKIP FROM t WHERE a = $1", 2)
	readRows("query skip", rows, err)
	rows, err = db.QueryContext(ctx, "SELECT FAIL")
	readRows("query fail", rows, err)

	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true})
	rec("begin serializable read-only %v", err)
	if err == nil {
		res, err = tx.ExecContext(ctx, "UPDATE t SET a = 1")
		rec("  tx exec %v %v", affected(res), err)
		rec("  commit %v", tx.Commit())
	}
	tx, err = db.BeginTx(ctx, nil)
	rec("begin %v", err)
	if err == nil {
		var id int64
		var nm string
		rec("  tx row %v", tx.QueryRowContext(ctx, "SELECT id, name FROM t").Scan(&id, &nm))
		rec("  rollback %v", tx.Rollback())
	}

	st, err := db.PrepareContext(ctx, "INSERT INTO t VALUES ($1, $2)")
	rec("prepare %v", err)
	if err == nil {
		res, err = st.ExecContext(ctx, money(3), "x")
		rec("  stmt exec %v %v", affected(res), err)
		rows, err := st.QueryContext(ctx, money(4), 1)
		readRows("  stmt query", rows, err)
		rec("  stmt close %v", st.Close())
	}
	_, err = db.PrepareContext(ctx, "BADPREPARE")
	rec("bad prepare %v", err)

	c, err := db.Conn(ctx)
	rec("conn %v", err)
	if err == nil {
		rec("  raw %v", c.Raw(func(dc any) error {
			rec("  raw conn %T", Unwrap(dc))
			return nil
		}))
		rec("  conn close %v", c.Close())
	}
	rec("db close %v", db.Close())
	return out
}

func affected(r sql.Result) string {
	if r == nil {
		return "nil"
	}
	n, err := r.RowsAffected()
	return fmt.Sprint(n, err)
}

var commentRE = regexp.MustCompile(` /\*[^*]*\*/`)

type fakeCase struct {
	name string
	new  func(*fakeLog) driver.Driver
}

var fakeCases = []fakeCase{
	{"min", func(l *fakeLog) driver.Driver { return &minDriver{log: l} }},
	{"full/stmt-min", func(l *fakeLog) driver.Driver { return &fullDriver{log: l, kind: kindMin} }},
	{"full/stmt-nvc", func(l *fakeLog) driver.Driver { return &fullDriver{log: l, kind: kindNVC} }},
	{"full/stmt-cc", func(l *fakeLog) driver.Driver { return &fullDriver{log: l, kind: kindCC} }},
	{"full/stmt-both", func(l *fakeLog) driver.Driver { return &fullDriver{log: l, kind: kindBoth} }},
}

func rawConnector(t *testing.T, d driver.Driver) driver.Connector {
	if dc, ok := d.(driver.DriverContext); ok {
		c, err := dc.OpenConnector("dsn")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return dsnConnector{dsn: "dsn", d: d}
}

// TestConformance runs the same program against each fake driver, raw and
// wrapped (with and without an Observer, through WrapDriver and
// WrapConnector): the program must see the same results, and the driver
// must receive the same calls, except that every statement carries the
// comment.
func TestConformance(t *testing.T) {
	for _, fc := range fakeCases {
		t.Run(fc.name, func(t *testing.T) {
			rawLog := &fakeLog{}
			want := scenario(t, sql.OpenDB(rawConnector(t, fc.new(rawLog))))
			wantCalls := rawLog.take()

			for _, mode := range []string{"driver", "connector", "driver+observer", "connector+observer"} {
				t.Run(mode, func(t *testing.T) {
					log := &fakeLog{}
					var opts []Option
					var mu sync.Mutex
					var events []Event
					if strings.HasSuffix(mode, "observer") {
						opts = append(opts, WithObserver(func(_ context.Context, e Event) {
							mu.Lock()
							events = append(events, e)
							mu.Unlock()
						}))
					}
					var c driver.Connector
					if strings.HasPrefix(mode, "driver") {
						w := WrapDriver(fc.new(log), opts...)
						var err error
						if c, err = w.(driver.DriverContext).OpenConnector("dsn"); err != nil {
							t.Fatal(err)
						}
					} else {
						c = WrapConnector(rawConnector(t, fc.new(log)), opts...)
					}
					got := scenario(t, sql.OpenDB(c))
					if !slices.Equal(got, want) {
						t.Errorf("the program sees something else wrapped:\n got %s\nwant %s",
							strings.Join(got, "\n     "), strings.Join(want, "\n     "))
					}
					calls := log.take()
					const comment = ` /*route='GET%20%2Freports',tenant='acme',tier='T1'*/`
					stripped := make([]string, len(calls))
					for i, call := range calls {
						if strings.Contains(call, "Prepare") || strings.Contains(call, "conn.ExecContext") || strings.Contains(call, "conn.QueryContext") {
							if !strings.Contains(call, comment) {
								t.Errorf("statement without the comment: %s", call)
							}
						}
						stripped[i] = commentRE.ReplaceAllString(call, "")
					}
					if !slices.Equal(stripped, wantCalls) {
						t.Errorf("the driver sees other calls wrapped:\n got %s\nwant %s",
							strings.Join(stripped, "\n     "), strings.Join(wantCalls, "\n     "))
					}
					if strings.HasSuffix(mode, "observer") {
						checkEvents(t, events)
					}
				})
			}
		})
	}
}

// checkEvents checks what the scenario reports to an Observer.
func checkEvents(t *testing.T, events []Event) {
	t.Helper()
	ops := map[Op]int{}
	for _, e := range events {
		ops[e.Op]++
		if !e.Tagged || e.Tags != acme {
			t.Errorf("%v event without the context's tags: %+v", e.Op, e)
		}
		if e.Duration < 0 || e.Start.IsZero() {
			t.Errorf("%v event without timing: %+v", e.Op, e)
		}
		switch e.Op {
		case OpQuery, OpExec, OpPrepare:
			if !strings.Contains(e.Query, "tenant='acme'") {
				t.Errorf("%v event query without comment: %q", e.Op, e.Query)
			}
		}
		if e.Op == OpQuery && strings.Contains(e.Query, "SELECT id, name FROM t WHERE") && !e.Prepared && e.Err == nil {
			if e.Rows != 4 && e.Rows != 2 { // two result sets of two rows on full drivers
				t.Errorf("query rows = %d", e.Rows)
			}
		}
		if e.Op == OpExec && strings.Contains(e.Query, "UPDATE t SET a = $1") && e.Rows != 3 && e.Rows != 2 {
			t.Errorf("exec rows = %d", e.Rows)
		}
		if strings.Contains(e.Query, "FAIL") && e.Err == nil && !e.Prepared && e.Op != OpPrepare { // the min driver never fails
			t.Errorf("failed statement reported without its error: %+v", e)
		}
	}
	if ops[OpQuery] < 3 || ops[OpExec] < 3 || ops[OpPrepare] < 1 || ops[OpBegin] < 1 || ops[OpRollback] != 1 {
		t.Errorf("events by op: %v", ops)
	}
}

func TestOpenAndRegister(t *testing.T) {
	log := &fakeLog{}
	Register("sqlcomment-fake-full", &fullDriver{log: log}, WithApplication("billing"))
	db, err := Open("sqlcomment-fake-full", "dsn", WithApplication("api"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
	if _, err := db.ExecContext(ctx, "UPDATE t SET a = 1"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	calls := strings.Join(log.take(), "\n")
	// Open wraps the registered driver (already wrapped once by Register):
	// the innermost wrapper finds a comment and leaves the text alone.
	want := `UPDATE t SET a = 1 /*application='api',db_driver='sqlcomment-fake-full',tenant='acme'*/`
	if !strings.Contains(calls, want) {
		t.Errorf("calls:\n%s\nwant %s", calls, want)
	}
	if _, err := Open("no-such-driver", "dsn"); err == nil || !strings.HasPrefix(err.Error(), "sqlcomment: ") {
		t.Errorf("Open of an unknown driver: %v", err)
	}
}

func TestUntaggedStatementKeepsStaticTagsOnly(t *testing.T) {
	log := &fakeLog{}
	db := sql.OpenDB(WrapConnector(rawConnector(t, &fullDriver{log: log}), WithApplication("api"), WithDBDriver("fake")))
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "UPDATE t SET a = 1"); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(log.take(), "\n")
	if !strings.Contains(calls, "UPDATE t SET a = 1 /*application='api',db_driver='fake'*/ []") {
		t.Errorf("calls:\n%s", calls)
	}
}

// TestBaggageTenantCommentAndEventAgree: a context that carries its tenant
// only in OTel baggage (a downstream service) gets the same tenant in the
// comment and in the observer's Event, so the DB-time record and the
// comment never disagree.
func TestBaggageTenantCommentAndEventAgree(t *testing.T) {
	log := &fakeLog{}
	var got []Event
	db := sql.OpenDB(WrapConnector(rawConnector(t, &fullDriver{log: log}), WithDBDriver("fake"),
		WithObserver(func(_ context.Context, e Event) { got = append(got, e) })))
	defer db.Close()
	m, _ := baggage.NewMemberRaw(tenant.BaggageTenant, "globex")
	bg, _ := baggage.New(m)
	ctx := baggage.ContextWithBaggage(context.Background(), bg)
	if _, err := db.ExecContext(ctx, "UPDATE t SET a = 1"); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(log.take(), "\n")
	if !strings.Contains(calls, "tenant='globex'") {
		t.Errorf("comment lacks the baggage tenant:\n%s", calls)
	}
	if len(got) != 1 || !got[0].Tagged || got[0].Tags.Tenant != "globex" {
		t.Errorf("events %+v, want one for globex", got)
	}
}
