package meter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// A process records finished work; every interval the reporter cuts the
// window and sends it. Here the window is cut by hand, encoded and
// decoded as the collector would.
func Example() {
	start := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	rec, err := meter.NewRecorder(
		meter.WithSource(report.Source{Service: "billing-api", Instance: "pod-7-boot-1", Host: "pod-7"}),
		meter.WithClock(func() time.Time { return start }),
	)
	if err != nil {
		fmt.Println(err)
		return
	}

	acme := tenant.Tags{Tenant: "acme", Route: "GET /invoices", Tier: tenant.T2}
	for _, ms := range []int{12, 30, 18} {
		rec.Record(meter.Record{Tags: acme, Kind: report.KindDB, Duration: time.Duration(ms) * time.Millisecond, Rows: 10})
	}
	rec.Record(meter.Record{Tags: acme, Duration: 75 * time.Millisecond, Bytes: 2048})

	body, err := rec.Cut(start.Add(time.Second)).MarshalBinary()
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := report.Decode(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s/%s seq %d, %v window\n", rep.Source.Service, rep.Source.Instance, rep.Seq, rep.End.Sub(rep.Start))
	for _, kind := range []report.Kind{report.KindRequest, report.KindDB} {
		for _, r := range rep.Rows {
			if r.Kind == kind {
				fmt.Printf("%s %q %s %s: %d × %v, p50 ≈ %.0f ms, %d rows, %d bytes\n",
					r.Tenant, r.Route, r.Tier, r.Kind, r.Count, r.Duration, 1000*r.Latency.Quantile(0.5), r.Rows, r.Bytes)
			}
		}
	}
	// Output:
	// billing-api/pod-7-boot-1 seq 1, 1s window
	// acme "GET /invoices" T2 request: 1 × 75ms, p50 ≈ 75 ms, 0 rows, 2048 bytes
	// acme "GET /invoices" T2 db: 3 × 60ms, p50 ≈ 18 ms, 30 rows, 0 bytes
}

// A reporter ships the recorder's windows to the collector and hands the
// policy of its replies to the enforcement side. The collector here is a
// stand-in that decodes reports and replies with a policy.
func ExampleReporter() {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, report.MaxReportBytes))
		rep, err := report.Decode(body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, row := range rep.Rows {
			fmt.Printf("collector: seq %d: %s %s × %d\n", rep.Seq, row.Tenant, row.Kind, row.Count)
		}
		reply, _ := report.EncodeReply(report.Reply{Accepted: true, Policy: json.RawMessage(`{"version":1}`)})
		w.Header().Set("Content-Type", report.ReplyContentType)
		w.Write(reply)
	}))
	defer collector.Close()

	rec, err := meter.NewRecorder()
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := meter.NewReporter(collector.URL+"/v1/reports", rec,
		meter.WithToken("s3cret"),
		meter.WithPolicyHandler(func(p policy.Policy) { fmt.Println("policy version", p.Version) }))
	if err != nil {
		fmt.Println(err)
		return
	}
	rep.Start()

	rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /invoices"}, Duration: 40 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rep.Shutdown(ctx); err != nil { // sends the last window
		fmt.Println(err)
	}
	// Output:
	// collector: seq 1: acme request × 1
	// policy version 1
}
