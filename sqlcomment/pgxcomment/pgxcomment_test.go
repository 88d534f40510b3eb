package pgxcomment

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// recorder is a Querier that records what it is sent; it never reaches a
// database (the PostgreSQL tests do).
type recorder struct{ sent []string }

func (r *recorder) record(sql string, args []any) {
	r.sent = append(r.sent, fmt.Sprintf("%s %v", sql, args))
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.record(sql, args)
	return pgconn.NewCommandTag("UPDATE 1"), nil
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.record(sql, args)
	return nil, fmt.Errorf("recorder: no rows")
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.record(sql, args)
	return nil
}

func TestModes(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	span := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	tagged := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
	traced := trace.ContextWithSpanContext(tagged, span)
	const tp = "traceparent='00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00'"

	cases := []struct {
		name string
		ctx  context.Context
		args []any
		want string
	}{
		{"untagged keeps the cached default", context.Background(), []any{1},
			"SELECT $1 /*application='api'*/ [1]"},
		{"tagged goes in exec mode", tagged, []any{1},
			"SELECT $1 /*application='api',tenant='acme'*/ [exec 1]"},
		{"traceparent with exec mode", traced, []any{1},
			"SELECT $1 /*application='api',tenant='acme'," + tp + "*/ [exec 1]"},
		{"caller's cache mode respected, no traceparent", traced, []any{pgx.QueryExecModeCacheStatement, 1},
			"SELECT $1 /*application='api',tenant='acme'*/ [cache statement 1]"},
		{"caller's simple protocol gets traceparent", traced, []any{pgx.QueryExecModeSimpleProtocol, 1},
			"SELECT $1 /*application='api',tenant='acme'," + tp + "*/ [simple protocol 1]"},
		{"traceparent alone makes the text unique", trace.ContextWithSpanContext(context.Background(), span), nil,
			"SELECT $1 /*application='api'," + tp + "*/ [exec]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			db := Wrap(r, sqlcomment.WithApplication("api"), sqlcomment.WithTraceContext())
			db.Exec(c.ctx, "SELECT $1", c.args...)
			db.Query(c.ctx, "SELECT $1", c.args...)
			db.QueryRow(c.ctx, "SELECT $1", c.args...)
			for _, got := range r.sent {
				if got != c.want {
					t.Errorf("sent %q\nwant %q", got, c.want)
				}
			}
			if len(r.sent) != 3 {
				t.Errorf("sent %d statements", len(r.sent))
			}
		})
	}
}

func TestWithSharesCommenter(t *testing.T) {
	db := Wrap(&recorder{}, sqlcomment.WithMaxLen(64))
	r2 := &recorder{}
	tx := db.With(r2)
	if tx.Commenter() != db.Commenter() {
		t.Fatal("With made a new commenter")
	}
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: string(make([]byte, 100))})
	tx.Exec(ctx, "SELECT 1")
	if db.Commenter().Dropped() != 1 || len(r2.sent) != 1 {
		t.Errorf("dropped %d, sent %v", db.Commenter().Dropped(), r2.sent)
	}
}
