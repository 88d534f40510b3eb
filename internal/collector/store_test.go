package collector

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/store/duckstore"
	"github.com/qtop-dev/qtop/tenant"
)

const hostileTenant = "x'*/ DROP TABLE rollups; --"

// feedAndStop runs a collector on storeURL, feeds it reports from two
// processes (one tenant hostile, some load untagged), shuts it down
// (which writes the open minute) and returns what was acknowledged.
func feedAndStop(t *testing.T, storeURL string, dir string) (ru map[string]float64) {
	t.Helper()
	clk := &clock{t: t0}
	s, err := New(Config{Store: storeURL, DataDir: dir, Writer: "w1", Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ru = map[string]float64{}
	procs := []*process{newProcess(clk, "api", "a"), newProcess(clk, "worker", "b")}
	for i := range 20 {
		clk.Add(time.Second)
		for j, p := range procs {
			for k, name := range []string{"acme", hostileTenant, "globex"} {
				n := 1 + i + j + k
				for range n {
					p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: name, Route: "GET /x"}, Kind: report.KindRequest,
						Duration: 5 * time.Millisecond, RU: 2})
				}
				ru[name] += 2 * float64(n)
			}
			p.rec.Record(meter.Record{Kind: report.KindRequest, RU: 1}) // no tenant: unattributed
			ru[""] += 1
			body, err := p.rec.Cut(clk.Now()).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if status, _, msg, _, _ := ingest(s, body); status != 200 {
				t.Fatalf("refused: %d %s", status, msg)
			}
		}
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ru
}

// restartAndStop opens a collector again on the same data folder and
// store: it replays the write-ahead log and writes the minute again, at a
// higher version, which must replace the first rows rather than add to
// them.
func restartAndStop(t *testing.T, storeURL, dir string) {
	t.Helper()
	clk := &clock{t: t0.Add(30 * time.Second)}
	s, err := New(Config{Store: storeURL, DataDir: dir, Writer: "w1", Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(s.met.rollupsWritten.WithLabelValues("rollups")); n == 0 {
		t.Fatal("the restarted collector did not write the replayed minute again")
	}
}

func checkUsage(t *testing.T, st store.Store, want map[string]float64) {
	t.Helper()
	ctx := context.Background()
	us, err := st.Usage(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, u := range us {
		name := u.Tenant
		if name == report.UnknownTenant {
			name = ""
		}
		got[name] += u.RU
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored RU by tenant\n got %v\nwant %v", got, want)
	}
	rep, err := BuildReport(ctx, st, ReportRequest{From: t0.Add(-time.Hour), To: t0.Add(time.Hour), Cost: 1000, Currency: "USD"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	last := rep.Lines[len(rep.Lines)-1]
	if !last.Unattributed || last.Tenant != Unattributed || last.RU != want[""] {
		t.Fatalf("unattributed line %+v", last)
	}
	var sum float64
	for _, l := range rep.Lines {
		sum += l.Cost
	}
	if d := sum - 1000; d > 1e-6 || d < -1e-6 {
		t.Fatalf("costs add up to %v, want 1000", sum)
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf, FormatTable, false); err != nil || !strings.Contains(buf.String(), hostileTenant) {
		t.Fatalf("table: %v\n%s", err, buf.String())
	}
}

func TestDuckDBEndToEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "qtop.duckdb")
	want := feedAndStop(t, "duckdb://"+path, filepath.Join(dir, "data"))
	restartAndStop(t, "duckdb://"+path, filepath.Join(dir, "data"))
	st, err := duckstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkUsage(t, st, want)
}

func TestClickHouseEndToEnd(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	waitClickHouse(t, addr)
	db := fmt.Sprintf("qtop_col_e2e_%d", time.Now().UnixNano())
	dir := t.TempDir()
	want := feedAndStop(t, "clickhouse://"+addr+"/"+db, dir)
	restartAndStop(t, "clickhouse://"+addr+"/"+db, dir)
	waitClickHouse(t, addr)
	st, err := chstore.Open(context.Background(), addr, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkUsage(t, st, want)
}
