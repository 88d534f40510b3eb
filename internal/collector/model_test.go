package collector

import (
	"context"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// TestOneKind: the kinds have one type (ingest.Kind), and the PostgreSQL
// sampler's rows a real value of it (it used to be a bare 3 "after the
// ingest kinds" in the collector); the stores keep exactly its names; no
// report can carry the sampler's kind.
func TestOneKind(t *testing.T) {
	for k, want := range map[report.Kind]string{report.KindRequest: store.KindRequest, report.KindDB: store.KindDB,
		report.KindJob: store.KindJob, report.KindPG: store.KindPG} {
		if k.String() != want {
			t.Errorf("kind %d is %q, the stores call it %q", k, k.String(), want)
		}
	}
	if report.KindPG.Valid() {
		t.Fatal("a process could report the sampler's kind")
	}
	rep := &report.Report{Source: report.Source{Service: "a", Instance: "b"}, Start: t0, End: t0.Add(time.Second),
		Rows: []report.Row{{Tenant: "t", Kind: report.KindPG, Count: 1}}}
	if _, err := rep.MarshalBinary(); err == nil {
		t.Fatal("a report with the sampler's kind encodes")
	}
}

// TestTierIsNotLastWriteWins: a row whose reports carry two tiers is
// stored with the tier of most records, whatever the order they came in
// (it used to be the last report's).
func TestTierIsNotLastWriteWins(t *testing.T) {
	for _, order := range [][]tenant.Tier{{tenant.T1, tenant.T3}, {tenant.T3, tenant.T1}} {
		f := newFixture(t)
		counts := map[tenant.Tier]uint64{tenant.T1: 90, tenant.T3: 10}
		for i, tier := range order {
			f.clk.Add(time.Second)
			rep := &report.Report{Source: report.Source{Service: "api", Instance: "p"}, Seq: uint64(i + 1),
				Start: f.clk.Now().Add(-time.Second), End: f.clk.Now(),
				Rows: []report.Row{{Tenant: "acme", Route: "r", Tier: tier, Kind: report.KindRequest, Count: counts[tier]}}}
			body, err := rep.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if f.ingest(body) != 200 {
				t.Fatal("refused")
			}
		}
		f.s.Tick(context.Background(), t0.Truncate(time.Minute).Add(time.Minute+DefaultGrace+time.Second))
		f.mem.mu.Lock()
		var got []tenant.Tier
		for _, r := range f.mem.rollups {
			got = append(got, r.Tier)
		}
		f.mem.mu.Unlock()
		if len(got) != 1 || got[0] != tenant.T1 {
			t.Fatalf("order %v: stored tiers %v, want [T1] (90 of 100 records)", order, got)
		}
		f.stop()
	}
}
