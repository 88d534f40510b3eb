package sqlcomment

import (
	"context"
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/tenant"
)

func TestCommenterTags(t *testing.T) {
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "GET /r", Tier: tenant.T2, Key: "user:42"})
	cases := []struct {
		name string
		opts []Option
		ctx  context.Context
		want string
		uniq bool
	}{
		{"no tags", nil, context.Background(), "SELECT 1", false},
		{"static only", []Option{WithApplication("api"), WithDBDriver("pgx")}, context.Background(),
			"SELECT 1 /*application='api',db_driver='pgx'*/", false},
		{"context", nil, ctx, "SELECT 1 /*route='GET%20%2Fr',tenant='acme',tier='T2'*/", true},
		{"key is opt-in", []Option{WithKey()}, ctx,
			"SELECT 1 /*key='user%3A42',route='GET%20%2Fr',tenant='acme',tier='T2'*/", true},
		{"custom tag", []Option{WithTag("region", "eu"), WithTag("tenant", "spoof"), WithTag("", "x")}, ctx,
			"SELECT 1 /*region='eu',route='GET%20%2Fr',tenant='acme',tier='T2'*/", true},
		{"unset tier omitted", nil, tenant.With(context.Background(), tenant.Tags{Tenant: "a"}),
			"SELECT 1 /*tenant='a'*/", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := NewCommenter(c.opts...).Comment(c.ctx, "SELECT 1", false)
			if st.Query != c.want || st.Unique != c.uniq {
				t.Errorf("got %q unique=%v, want %q unique=%v", st.Query, st.Unique, c.want, c.uniq)
			}
		})
	}
}

func TestCommenterTraceContext(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("congo=t61rcWkgMzE")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	off := NewCommenter().Comment(ctx, "SELECT 1", false)
	if off.Query != "SELECT 1" || off.Unique {
		t.Errorf("trace context without WithTraceContext: %+v", off)
	}
	c := NewCommenter(WithTraceContext())
	on := c.Comment(ctx, "SELECT 1", false)
	want := "SELECT 1 /*traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',tracestate='congo%3Dt61rcWkgMzE'*/"
	if on.Query != want || !on.Unique {
		t.Errorf("got %q unique=%v, want %q", on.Query, on.Unique, want)
	}
	if p := c.Comment(ctx, "SELECT 1", true); p.Query != "SELECT 1" || p.Unique {
		t.Errorf("a prepared statement got the trace context: %+v", p)
	}
	back, err := Parse(on.Query)
	if err != nil || back[KeyTraceparent] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("Parse = %v, %v", back, err)
	}
}

// TestCommenterCap: tags are kept by priority while they fit; each drop is
// counted.
func TestCommenterCap(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	long := strings.Repeat("k", 100)
	c := NewCommenter(WithMaxLen(100), WithApplication("api"), WithTag("region", "eu"), WithKey(), WithRegisterer(reg))
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "GET /r", Key: long})
	st := c.Comment(ctx, "SELECT 1", false)
	want := "SELECT 1 /*application='api',region='eu',route='GET%20%2Fr',tenant='acme'*/"
	if st.Query != want {
		t.Errorf("got %q, want %q", st.Query, want)
	}
	if c.Dropped() != 1 {
		t.Errorf("Dropped = %d, want 1", c.Dropped())
	}
	// A 10 KB tenant is dropped, and only it.
	huge := tenant.With(context.Background(), tenant.Tags{Tenant: strings.Repeat("x", 10<<10), Route: "r"})
	st = c.Comment(huge, "SELECT 1", false)
	if st.Query != "SELECT 1 /*application='api',region='eu',route='r'*/" {
		t.Errorf("got %.120q", st.Query)
	}
	if c.Dropped() != 2 {
		t.Errorf("Dropped = %d, want 2", c.Dropped())
	}
	// Small caps are raised to hold a tenant.
	if got := NewCommenter(WithMaxLen(-1)).cfg.maxLen; got != minMaxLen {
		t.Errorf("WithMaxLen(-1) gives %d", got)
	}
	// A second commenter on the same registerer shares the counter.
	c2 := NewCommenter(WithMaxLen(64), WithRegisterer(reg))
	c2.Comment(huge, "SELECT 1", false)
	err := testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP qtop_sqlcomment_dropped_tags_total Tags left out of SQL comments because the comment would exceed its length cap, by key.
# TYPE qtop_sqlcomment_dropped_tags_total counter
qtop_sqlcomment_dropped_tags_total{key="key"} 1
qtop_sqlcomment_dropped_tags_total{key="tenant"} 2
`))
	if err != nil {
		t.Error(err)
	}
	if probs, err := testutil.CollectAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", probs, err)
	}
}

func TestCommenterLeavesCommentedStatements(t *testing.T) {
	c := NewCommenter(WithApplication("api"))
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
	for _, q := range []string{"SELECT 1 /* mine */", "", "SELECT 'x"} {
		if st := c.Comment(ctx, q, false); st.Query != q || !st.Tagged {
			t.Errorf("Comment(%q) = %+v", q, st)
		}
	}
}

func TestLeadingArgs(t *testing.T) {
	log := &fakeLog{}
	type mode string
	wc := WrapConnector(rawConnector(t, &fullDriver{log: log}), WithLeadingArgs(mode("exec")))
	conn, err := wc.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ec := conn.(driver.ExecerContext)
	args := []driver.NamedValue{{Ordinal: 1, Value: int64(1)}}
	ec.ExecContext(context.Background(), "UPDATE t SET a = $1", args)
	ec.ExecContext(tenant.With(context.Background(), tenant.Tags{Tenant: "a"}), "UPDATE t SET a = $1", args)
	conn.(driver.QueryerContext).QueryContext(tenant.With(context.Background(), tenant.Tags{Tenant: "a"}), "SELECT $1", args)
	calls := log.take()
	want := []string{
		"driver.OpenConnector dsn",
		"connector.Connect",
		"conn.ExecContext UPDATE t SET a = $1 [{ 1 1}]",
		"conn.ExecContext UPDATE t SET a = $1 /*tenant='a'*/ [{ 0 exec} { 1 1}]",
		"conn.QueryContext SELECT $1 /*tenant='a'*/ [{ 0 exec} { 1 1}]",
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if args[0].Value != int64(1) || len(args) != 1 {
		t.Error("the caller's arguments changed")
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpQuery: "query", OpExec: "exec", OpBegin: "begin", OpCommit: "commit",
		OpRollback: "rollback", OpPrepare: "prepare", OpPing: "ping", 0: "unknown", 99: "unknown"} {
		if op.String() != want {
			t.Errorf("%d: %q", op, op.String())
		}
	}
}

// TestCommenterUnique: Unique says whether the text carries per-request
// values, which decides whether pgxcomment may let pgx cache it.
func TestCommenterUnique(t *testing.T) {
	tagged := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
	huge := tenant.With(context.Background(), tenant.Tags{Tenant: strings.Repeat("x", 200)})
	cases := []struct {
		name  string
		c     *Commenter
		ctx   context.Context
		q     string
		want  bool
		query string
	}{
		{"tagged", NewCommenter(), tagged, "SELECT 1", true, "SELECT 1 /*tenant='acme'*/"},
		{"untagged static", NewCommenter(WithApplication("a")), context.Background(), "SELECT 1", false, "SELECT 1 /*application='a'*/"},
		{"already commented", NewCommenter(), tagged, "SELECT 1 /* x */", false, "SELECT 1 /* x */"},
		{"empty tags", NewCommenter(), tenant.With(context.Background(), tenant.Tags{}), "SELECT 1", false, "SELECT 1"},
		{"tenant dropped by the cap", NewCommenter(WithMaxLen(64), WithTag("region", "eu")), huge, "SELECT 1", false, "SELECT 1 /*region='eu'*/"},
		{"general path keeps tenant", NewCommenter(WithTag("region", "eu")), tagged, "SELECT 1", true, "SELECT 1 /*region='eu',tenant='acme'*/"},
	}
	for _, c := range cases {
		st := c.c.Comment(c.ctx, c.q, false)
		if st.Unique != c.want || st.Query != c.query {
			t.Errorf("%s: %q unique=%v, want %q unique=%v", c.name, st.Query, st.Unique, c.query, c.want)
		}
	}
}
