package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// incidentAt is second i of a scripted incident: 20 quiet tenants at
// 10 RU/s and p95 20 ms; from second 40 bigcorp's import takes 80% of
// the RU and the others' p95 doubles while their load stays.
func incidentAt(i int) api.Snapshot {
	s := api.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU}
	busy := i >= 40
	hist := make([]float64, api.HistoryLen)
	for j := range hist {
		if sec := i - (api.HistoryLen - 1 - j); sec >= 40 {
			hist[j] = 800
		} else if sec >= 0 {
			hist[j] = 1
		}
	}
	big := api.TenantRow{Tenant: "bigcorp", RUPerSec: 1, P95Seconds: 0.5, Share: 0.005, History: hist}
	p95 := 0.020
	if busy {
		big.RUPerSec, big.Share = 800, 0.8
		p95 = 0.041
	}
	s.Tenants = append(s.Tenants, big)
	for k := range 20 {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("t%02d", k), RUPerSec: 10, P95Seconds: p95, Share: 0.01,
			History: make([]float64, api.HistoryLen)})
	}
	return s
}

func TestSummaryDriversAndVictims(t *testing.T) {
	var in summary
	for i := range 40 {
		s := incidentAt(i)
		in.add(&s)
	}
	if in.alert || !strings.Contains(in.line, "no tenant drives load") || !strings.Contains(in.line, "victims: none") {
		t.Fatalf("before the import: %q", in.line)
	}
	for i := 40; i < 45; i++ {
		s := incidentAt(i)
		in.add(&s)
	}
	if !in.alert || !strings.Contains(in.line, "bigcorp 80% of RU, ×") || !strings.Contains(in.line, "victims: 20 tenants, p95 ×2.0") {
		t.Fatalf("during the import: %q", in.line)
	}
	// A tenant whose load rose with its latency is no victim: its share
	// of RU (1/21 before the import) grew although bigcorp took 80%.
	s := incidentAt(46)
	s.Tenants[1].RUPerSec, s.Tenants[1].Share = 90, 0.09
	in.add(&s)
	if !strings.Contains(in.line, "victims: 19 tenants") {
		t.Fatalf("with t00's own load up: %q", in.line)
	}
}

func TestSummaryBaselineFromFirstSnapshots(t *testing.T) {
	// qtop started during the incident's first seconds: the first
	// baselineMin snapshots are the baseline until 30 s of history exist.
	var in summary
	for i := 35; i < 35+baselineMin; i++ {
		s := incidentAt(i)
		in.add(&s)
	}
	s := incidentAt(41)
	in.add(&s)
	if !strings.Contains(in.line, "victims: 20 tenants") {
		t.Fatalf("%q", in.line)
	}
}

func TestSummaryPostgresAndGroups(t *testing.T) {
	// qtop --postgres has sampled since the start of the incident's
	// scenario (its history holds what this qtop has seen).
	var in summary
	var s api.Snapshot
	for i := range 51 {
		s = incidentAt(i)
		s.Source, s.Measure = api.SourcePostgres, api.MeasureDB
		for i := range s.Tenants {
			s.Tenants[i].DBLoad = s.Tenants[i].RUPerSec / 100
		}
		in.add(&s)
	}
	if !strings.Contains(in.line, "bigcorp 80% of DB load") || !strings.Contains(in.line, "victims n/a") {
		t.Fatalf("postgres: %q", in.line)
	}
	s = incidentAt(50)
	s.GroupBy = api.GroupApplication
	s.Tenants[0].Tenant, s.Tenants[0].Untagged = "", true
	in.add(&s)
	if !strings.Contains(in.line, "(no application_name) 80%") {
		t.Fatalf("grouped: %q", in.line)
	}
}

func TestSummaryForgetsAndBounds(t *testing.T) {
	var in summary
	for i := range baselineSpan + 2 {
		s := api.Snapshot{Source: api.SourceCollector}
		if i == 0 {
			s.Tenants = []api.TenantRow{{Tenant: "gone", RUPerSec: 1, P95Seconds: 0.01}}
		}
		in.add(&s)
	}
	if len(in.rows) != 0 {
		t.Fatalf("%d baselines kept", len(in.rows))
	}
	s := manyTenants(3000)
	in.add(&s)
	if len(in.rows) > maxBaselines {
		t.Fatalf("%d baselines", len(in.rows))
	}
}

func BenchmarkSummary1000(b *testing.B) {
	s := manyTenants(1000)
	var in summary
	b.ReportAllocs()
	for b.Loop() {
		in.add(&s)
	}
}
