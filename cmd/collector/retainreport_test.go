package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/store/storetest"
)

// TestReportStoreRetention: ClickHouse keeps the day that straddles the
// retention's horizon until all of it is past, so collector report read
// from the store counted minutes past the retention that the collector,
// asked the same report, leaves out (and that DuckDB has deleted): two
// bills for one range. With --retention (QTOP_RETENTION, as serve reads
// it) the report counts from the horizon and says so, and a range that
// ends before it counts nothing.
func TestReportStoreRetention(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	waitClickHouse(t, addr)
	db := fmt.Sprintf("qtop_report_ret_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}}); err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
			conn.Close()
		}
	})
	st, err := chstore.Open(context.Background(), addr, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	past, recent := storetest.Row(0, "w1", "acme", "/a", 1000), storetest.Row(0, "w1", "acme", "/a", 7)
	past.Minute, recent.Minute = now.Add(-40*time.Hour).Truncate(time.Minute), now.Add(-2*time.Hour).Truncate(time.Minute)
	if err := st.WriteRollups(context.Background(), []store.Rollup{past, recent}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	report := func(to string) collector.CostReport {
		var out, errb bytes.Buffer
		args := []string{"report", "--store", "clickhouse://" + addr + "/" + db, "--retention", "36h", "--from", "48h", "--to", to, "--format", "json"}
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		var rep collector.CostReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, c := range []struct {
		to   string
		want uint64
	}{{"1h", 7}, {"38h", 0}} {
		rep := report(c.to)
		if rep.Total.Requests != c.want || !strings.Contains(rep.Note, "past the collector's retention (36h0m0s)") {
			t.Errorf("--to %s: %d requests (note %q), want %d", c.to, rep.Total.Requests, rep.Note, c.want)
		}
	}
}
