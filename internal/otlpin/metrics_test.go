package otlpin

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetrics(t *testing.T) {
	clk := &fakeClock{now: t0}
	reg := prometheus.NewRegistry()
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithRegisterer(reg))
	bad := server(2, "acme", "/a", time.Millisecond)
	bad.start = time.Time{}
	internal := spanSpec{trace: 1, id: 5, name: "x", kind: 1, start: t0, dur: time.Millisecond}
	w := post(t, r, ContentTypeProtobuf, "", marshal(t, request("api", server(1, "bad\u0007", "/a", time.Millisecond), bad, internal,
		pgSpan(9, 2, "SELECT * FROM a", time.Millisecond))))
	if w.Code != 200 {
		t.Fatal(w.Code)
	}
	post(t, r, ContentTypeProtobuf, "", []byte{0xff})
	r.Flush(clk.now.Add(time.Hour))
	want := `
# HELP qtop_otlp_spans_total OTLP spans received, by what became of them: request, job, db (recorded with a tenant of its own or its comment's), db_by_trace (a database span that takes its trace's tenant), pool_wait (a connection-pool span: pool wait, not DB time), request_gated (a server span of a service behind a gate, which counted the request), dropped (other kinds, non-PostgreSQL clients, PostgreSQL spans with neither a statement nor a pool name), rejected (refused alone: qtop_otlp_spans_rejected_total).
# TYPE qtop_otlp_spans_total counter
qtop_otlp_spans_total{result="db"} 0
qtop_otlp_spans_total{result="db_by_trace"} 1
qtop_otlp_spans_total{result="dropped"} 1
qtop_otlp_spans_total{result="job"} 0
qtop_otlp_spans_total{result="pool_wait"} 0
qtop_otlp_spans_total{result="rejected"} 1
qtop_otlp_spans_total{result="request"} 1
qtop_otlp_spans_total{result="request_gated"} 0
# HELP qtop_otlp_requests_total OTLP export requests, by transport (http, grpc) and result (ok, partial, malformed, too_large, busy: no decode slot or memory in time, refused: refused for now by the collector, its disk below the reserve or its log replaying, unauthorized, unsupported, slow: a body sent below the minimum rate).
# TYPE qtop_otlp_requests_total counter
qtop_otlp_requests_total{result="malformed",transport="http"} 1
qtop_otlp_requests_total{result="partial",transport="http"} 1
# HELP qtop_otlp_invalid_values_total Tenant, route, tier or source values of OTLP spans that failed validation and were replaced: a tenant by its stand-in (tenant.Substitute, never merged with another tenant; an empty one by (untagged)), a route by its stand-in (tenant.SubstituteRoute, never the overflow route other), a tier by unset, a source field by its default.
# TYPE qtop_otlp_invalid_values_total counter
qtop_otlp_invalid_values_total 1
# HELP qtop_otlp_db_spans_unattributed_total Database spans recorded for tenant unknown: no tenant of their own, and their trace's root span did not arrive within the wait (or the wait list was full).
# TYPE qtop_otlp_db_spans_unattributed_total counter
qtop_otlp_db_spans_unattributed_total 1
# HELP qtop_otlp_reports_total Windows of OTLP sources handed to the collector's merge, by result: merged, retried (refused for now, kept), dropped.
# TYPE qtop_otlp_reports_total counter
qtop_otlp_reports_total{result="merged"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_otlp_spans_total", "qtop_otlp_requests_total",
		"qtop_otlp_invalid_values_total", "qtop_otlp_db_spans_unattributed_total", "qtop_otlp_reports_total"); err != nil {
		t.Fatal(err)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", probs, err)
	}
}
