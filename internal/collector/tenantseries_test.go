package collector

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/qtop-dev/qtop/topn"
)

// TestTenantSeriesMonotonicAndBounded: 200 tenants take turns at the top
// of a ranking for three hours (each a few minutes, many twice). Every
// exported counter only grows while its series exists, and the distinct
// tenant label values of any hour stay within seriesCap +
// seriesAdmitPerHour.
func TestTenantSeriesMonotonicAndBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts, err := newTenantSeries(reg, topn.Metric{Measure: topn.RU, Name: "qtop_collector_tenant_ru_total"})
	if err != nil {
		t.Fatal(err)
	}
	rank, err := topn.New(metricsTopN, topn.WithRankBy(topn.RU))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	last := map[string]float64{}
	seenAt := map[string][]time.Time{} // when each label value was exported
	const tenants = 200
	for sec := 0; sec < 3*3600; sec += 10 {
		now := t0.Add(time.Duration(sec) * time.Second)
		// The hot set moves by one tenant a minute and comes back around.
		hot := (sec / 60) % tenants
		for k := range tenants {
			v := topn.Values{}
			v[topn.RU] = 1
			if d := (k - hot + tenants) % tenants; d < 25 {
				v[topn.RU] = float64(1000 - 10*d)
			}
			name := fmt.Sprintf("t%03d", k)
			rank.Add(name, v)
			ts.add(name, v, now)
		}
		rank.Rerank()
		ts.refresh(rank.Members(), now)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		present := map[string]bool{}
		for _, m := range mfs[0].Metric {
			name, val := labelOf(m), m.GetCounter().GetValue()
			present[name] = true
			if prev, ok := last[name]; ok && val < prev {
				t.Fatalf("%s: %s went from %g to %g", now, name, prev, val)
			}
			last[name] = val
			if name != topn.Other {
				seenAt[name] = append(seenAt[name], now)
			}
		}
		for name := range last {
			if !present[name] {
				delete(last, name) // gone: it may come back as a new series
			}
		}
		if n := len(present) - 1; n > seriesCap {
			t.Fatalf("%d tenant series at once", n)
		}
	}
	// Distinct values in each hour-long window.
	for start := t0; start.Before(t0.Add(2 * time.Hour)); start = start.Add(10 * time.Minute) {
		n := 0
		for _, ats := range seenAt {
			for _, at := range ats {
				if !at.Before(start) && at.Before(start.Add(time.Hour)) {
					n++
					break
				}
			}
		}
		if n > seriesCap+seriesAdmitPerHour {
			t.Fatalf("%d distinct tenants in the hour from %s", n, start)
		}
		if n < metricsTopN {
			t.Fatalf("only %d tenants had series in the hour from %s", n, start)
		}
	}
}

func labelOf(m *dto.Metric) string {
	for _, l := range m.Label {
		if l.GetName() == "tenant" {
			return l.GetValue()
		}
	}
	return ""
}
