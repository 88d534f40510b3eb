package collector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
)

// TestBaselinesSameForEveryQtop: the collector keeps each tenant's
// baseline over the trailing hour and serves it in the live view, so a
// qtop that starts (or restarts) during an incident names the same
// victims as one that watched from before it — where, on its own
// baselines, the late one took the incident for normal.
//
// It goes on in holdAndRestart: the same incident, longer, then a restart.
func TestBaselinesSameForEveryQtop(t *testing.T) {
	f := newFixture(t, demoNoStore)
	defer f.stop()
	fleet, err := newDemoFleet(f.s, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Two complete minutes before the last one make a baseline here (the
	// collector's: five before the last three), to keep the test short.
	f.s.feat.base.gap, f.s.feat.base.need = 1, 2
	const importAt = 4 * time.Minute
	fleet.importAfter = importAt
	fleet.warm(f.clk.Now())
	h := httpAPI{f.s}
	ctx := context.Background()
	var early, late, lateOwn incident.Tracker
	var he, hl, ho incident.Headline
	var before float64
	var svcBefore api.ServiceRow
	var last api.Snapshot
	for sec := 1; sec <= int((importAt+45*time.Second)/time.Second); sec++ {
		fleet.step(f.clk.Add(time.Second))
		f.s.Tick(ctx, f.clk.Now())
		h.stepAutopilot(ctx)
		snap := f.s.Snapshot(f.clk.Now(), api.MeasureRU, defaultTop)
		he, last = early.Add(&snap), snap
		if sec == int(importAt/time.Second)-1 {
			if r := rowOf(snap, "acme"); r.BaselineP95Seconds <= 0 || r.BaselineShare <= 0 || r.BaselineRUPerSec <= 0 {
				t.Fatalf("no baseline served for acme after %v: %+v", importAt, r)
			}
			before = rowOf(snap, "acme").BaselineP95Seconds
			svcBefore = serviceOf(snap, "storefront-api")
			if svcBefore.BaselineP95Seconds <= 0 || svcBefore.BaselineP95Seconds > 1.5*svcBefore.P95Seconds {
				t.Fatalf("storefront-api before the import: %+v", svcBefore)
			}
		}
		if time.Duration(sec)*time.Second >= importAt+15*time.Second {
			// Started during the incident: on the collector's baselines,
			// and (as before) on its own.
			hl = late.Add(&snap)
			own := snap
			own.Tenants = slices.Clone(snap.Tenants)
			for i := range own.Tenants {
				own.Tenants[i].BaselineP95Seconds, own.Tenants[i].BaselineShare = 0, 0
			}
			ho = lateOwn.Add(&own)
		}
	}
	names := func(h incident.Headline) []string {
		var n []string
		for _, v := range h.Victims {
			n = append(n, v.Tenant+"/"+v.BaselineFrom)
		}
		slices.Sort(n)
		return n
	}
	if len(he.Victims) < 3 || !slices.Equal(names(he), names(hl)) {
		t.Fatalf("victims seen from the start %v, by a qtop started late %v", names(he), names(hl))
	}
	if he.Victims[0].BaselineFrom != "collector" {
		t.Fatalf("baselines from %s", he.Victims[0].BaselineFrom)
	}
	// The collector serves how long it has seen each victim slow, and a
	// qtop reading once (a fresh tracker, one snapshot) names the same.
	for _, v := range he.Victims {
		if r := rowOf(last, v.Tenant); r.SlowSince.IsZero() || r.SlowSince.After(v.Since) {
			t.Fatalf("victim %s since %v: served slow since %v", v.Tenant, v.Since, r.SlowSince)
		}
	}
	var once incident.Tracker
	if h := once.Add(&last); !slices.Equal(names(h), names(he)) {
		t.Fatalf("victims seen from the start %v, by a qtop reading once %v", names(he), names(h))
	}
	if len(ho.Victims) >= len(hl.Victims) {
		t.Fatalf("on its own baselines a late qtop saw %d victims, on the collector's %d: the test shows nothing", len(ho.Victims), len(hl.Victims))
	}
	t.Logf("victims: from the start %d, started late %d, started late on its own baselines %d", len(he.Victims), len(hl.Victims), len(ho.Victims))
	holdAndRestart(t, f, fleet, before, svcBefore.BaselineP95Seconds, importAt+45*time.Second)
}

func serviceOf(s api.Snapshot, name string) api.ServiceRow {
	for _, r := range s.Services {
		if r.Service == name {
			return r
		}
	}
	return api.ServiceRow{}
}

// gauge returns a gauge of the collector's registry by its service label
// (0 and false: no such series).
func gauge(t *testing.T, f *fixture, metric, service string) (float64, bool) {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == metric && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == service {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func demoNoStore(c *Config) { c.Demo = true; c.Store = StoreNone }

func rowOf(s api.Snapshot, tenant string) api.TenantRow {
	for _, r := range s.Tenants {
		if r.Tenant == tenant {
			return r
		}
	}
	return api.TenantRow{}
}

// holdAndRestart goes on with TestBaselinesSameForEveryQtop's incident
// (at elapsed, bigcorp's import under way; acme's baseline p95 was
// before): the import lasts six minutes, longer than the pre-incident
// minutes the baselines were taken from, and the incident's seconds do
// not teach them, so a qtop started five minutes into it still names
// bigcorp (as the collector flagged it) and the victims. The collector
// then restarts on the same data folder: it serves the same baselines
// from its first second, and a qtop on it names the same offender and
// victims.
//
// A service's baseline p95 is held the same way: six minutes into the
// import storefront-api's p95 is still more than twice its baseline (what
// QtopLatencyRatioCritical compares, where the latency ratio itself has
// long recovered), and the restarted collector exports the same baseline.
func holdAndRestart(t *testing.T, f *fixture, fleet *demoFleet, before, svcBefore float64, elapsed time.Duration) {
	const runFor = 10 * time.Minute // since the start; the import began at 4 min
	ctx := context.Background()
	var late incident.Tracker
	var snap api.Snapshot
	for sec := 1; sec <= int((runFor-elapsed)/time.Second); sec++ {
		fleet.step(f.clk.Add(time.Second))
		f.s.Tick(ctx, f.clk.Now())
		httpAPI{f.s}.stepAutopilot(ctx)
		snap = f.s.Snapshot(f.clk.Now(), api.MeasureRU, defaultTop)
		if time.Duration(sec)*time.Second > runFor-elapsed-time.Minute {
			late.Add(&snap)
		}
	}
	h := late.Headline()
	after := rowOf(snap, "acme").BaselineP95Seconds
	svc := serviceOf(snap, "storefront-api")
	if svc.BaselineP95Seconds <= 0 || svc.BaselineP95Seconds > 1.25*svcBefore || svc.P95Seconds < 2*svc.BaselineP95Seconds {
		t.Fatalf("storefront-api six minutes into the import: p95 %v, baseline %v (before the import %v)", svc.P95Seconds, svc.BaselineP95Seconds, svcBefore)
	}
	if svc.Ratio < 0.5 {
		t.Fatalf("storefront-api's latency ratio %v six minutes into the import: the test shows nothing", svc.Ratio)
	}
	if v, ok := gauge(t, f, "qtop_collector_latency_baseline_p95_seconds", "storefront-api"); !ok || v != svc.BaselineP95Seconds {
		t.Fatalf("qtop_collector_latency_baseline_p95_seconds = %v, %v; want %v", v, ok, svc.BaselineP95Seconds)
	}
	if v, ok := gauge(t, f, "qtop_collector_latency_p95_seconds", "storefront-api"); !ok || v != svc.P95Seconds {
		t.Fatalf("qtop_collector_latency_p95_seconds = %v, %v; want %v", v, ok, svc.P95Seconds)
	}
	if before <= 0 || after > 1.25*before {
		t.Fatalf("acme's baseline p95 %v before the import, %v six minutes into it", before, after)
	}
	if len(h.Offenders) != 1 || h.Offenders[0].Name != "bigcorp" || h.Offenders[0].BaselineFrom != "collector" || len(h.Victims) < 3 {
		t.Fatalf("a qtop started five minutes into the import: %q %+v", h.Line, h.Offenders)
	}
	if _, err := os.Stat(filepath.Join(f.dir, baselinesFile)); err != nil {
		t.Fatal(err)
	}

	f.stop()
	f.start(demoNoStore)
	f.s.feat.base.gap, f.s.feat.base.need = 1, 2
	fleet, err := newDemoFleet(f.s, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	fleet.importAfter = 0
	var again incident.Tracker
	for range 20 {
		fleet.step(f.clk.Add(time.Second))
		f.s.Tick(ctx, f.clk.Now())
		httpAPI{f.s}.stepAutopilot(ctx)
		snap = f.s.Snapshot(f.clk.Now(), api.MeasureRU, defaultTop)
		if r := rowOf(snap, "acme"); r.Tenant == "acme" && r.BaselineP95Seconds != after {
			t.Fatalf("after the restart acme's baseline p95 is %v, was %v", r.BaselineP95Seconds, after)
		}
		again.Add(&snap)
	}
	h2 := again.Headline()
	if v, ok := gauge(t, f, "qtop_collector_latency_baseline_p95_seconds", "storefront-api"); !ok || v != svc.BaselineP95Seconds {
		t.Fatalf("after the restart qtop_collector_latency_baseline_p95_seconds = %v, %v; want %v", v, ok, svc.BaselineP95Seconds)
	}
	if r := rowOf(snap, "acme"); r.BaselineP95Seconds != after {
		t.Fatalf("after the restart acme's baseline p95 is %v, was %v", r.BaselineP95Seconds, after)
	}
	if len(h2.Offenders) != 1 || h2.Offenders[0].Name != "bigcorp" || len(h2.Victims) < 3 {
		t.Fatalf("a qtop on the restarted collector: %q", h2.Line)
	}
	t.Logf("five minutes in: %q; after the restart: %q", h.Line, h2.Line)
}

// TestBaselinesFormUnderNewLoad: on a fresh collector, a tenant whose
// load starts after it (new load) while the others' p95 looks raised
// against the tracker's own two minutes (a mix of fast and slow
// requests) does not stop the baselines from forming: before, the book
// learnt nothing for the hour, so the headline stayed in a false incident
// and the latency alerts had no baseline.
func TestBaselinesFormUnderNewLoad(t *testing.T) {
	b := newBaselineBook()
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	const others = 19
	hist := make([][]float64, others+1)
	for sec := 0; sec < 12*60; sec++ {
		now := start.Add(time.Duration(sec) * time.Second)
		s := api.Snapshot{Time: now, Window: 10 * time.Second, Collector: api.CollectorStatus{Uptime: time.Duration(sec+1) * time.Second}}
		for i := range others + 1 {
			ru, p95 := 10.0, 0.003
			if sec >= 60 {
				p95 = 0.050 // the slow requests of the mix, from the second minute
			}
			if i == 0 {
				ru, p95 = 0, 0.004
				if sec >= 30 {
					ru = 100 // new load: a third of the RU
				}
			}
			hist[i] = append(hist[i], ru)
			h := make([]float64, api.HistoryLen)
			copy(h[max(api.HistoryLen-len(hist[i]), 0):], hist[i][max(len(hist[i])-api.HistoryLen, 0):])
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("t%02d", i), RUPerSec: ru, P95Seconds: p95, History: h})
		}
		b.snapshot(&s, now) // the baselines served, as the live view carries them
		b.add(&s, nil, nil)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	got, ok := b.served["t01"]
	if !ok || got[2] != 10 {
		t.Fatalf("after 12 minutes: t01's baseline %v (served %d tenants); want 10 RU/s", got, len(b.served))
	}
}

// TestBaselinePartialMinutes: a minute with fewer than minuteSeconds
// seconds learnt (a start or restart cut it) is not one a baseline is
// taken from.
func TestBaselinePartialMinutes(t *testing.T) {
	b := newBaselineBook()
	var tm tenantMinutes
	for m := int64(100); m < 110; m++ {
		secs := 60
		if m == 104 {
			secs = 5 // the restart's minute, at a third of the usual load
		}
		for range secs {
			ru := 200.0
			if m == 104 {
				ru = 66
			}
			tm.add(m, 0.02, 0.1, ru, 0)
		}
	}
	var ms minuteMeans
	b.complete(&tm, 110, &ms)
	if len(ms.ru) != 6 || slices.Contains(ms.ru, 66) {
		t.Fatalf("minutes taken %v: want the six complete ones before the gap, without the cut one", ms.ru)
	}
}

// TestBaselineFlagsDBOnlyLoad: a tenant whose load is sessions the
// sampler saw and no process reports (no RU) is flagged on its DB load,
// the rows served say so (FlaggedSince, BaselineDBLoad, no RU baseline),
// and a qtop started after the job began names it from them.
func TestBaselineFlagsDBOnlyLoad(t *testing.T) {
	b := newBaselineBook()
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	var served api.Snapshot
	for sec := range 90 {
		now := start.Add(time.Duration(sec) * time.Second)
		s := api.Snapshot{Time: now, Window: 10 * time.Second, Source: api.SourceCollector, Measure: api.MeasureRU,
			Collector: api.CollectorStatus{Uptime: time.Duration(sec+1) * time.Second}}
		for _, n := range []string{"acme", "globex"} {
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: n, RUPerSec: 10, DBLoad: 0.5, P95Seconds: 0.02, History: make([]float64, api.HistoryLen)})
		}
		if sec >= 60 {
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "pgnoisy", DBLoad: 4, History: make([]float64, api.HistoryLen)})
		}
		b.snapshot(&s, now)
		b.add(&s, nil, nil)
		served = s
	}
	r := served.Tenants[2]
	if r.Tenant != "pgnoisy" || !r.FlaggedSince.Equal(start.Add(61*time.Second)) || r.BaselineDBLoad != 0 || r.BaselineRUPerSec != 0 {
		t.Fatalf("served %+v; want pgnoisy flagged at 61 s as new DB load (its mean over the recent seconds then passes MinDBLoad)", r)
	}
	var late incident.Tracker
	if h := late.Add(&served); len(h.Offenders) != 1 || !strings.HasPrefix(h.Line, "pgnoisy 80% of DB load, new load") {
		t.Fatalf("a qtop started late: %q", h.Line)
	}
}

// TestBaselineRestartFillIsNotARise: a collector (re)started while a
// steady job runs on the database sees its rates climb for the seconds
// its window fills (they are averages over Window). Judged, that climb
// made the steady job an offender "×3 its baseline" (the fill's mean),
// served to every qtop, and since a flag against a baseline stops the
// learning, froze every tenant's baselines for the hour the flag lasts.
func TestBaselineRestartFillIsNotARise(t *testing.T) {
	b := newBaselineBook()
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	const window = 10 * time.Second
	var served api.Snapshot
	for sec := range 120 {
		now := start.Add(time.Duration(sec) * time.Second)
		up := time.Duration(sec+1) * time.Second
		fill := min(float64(up)/float64(window), 1) // the window's part filled
		s := api.Snapshot{Time: now, Window: window, Source: api.SourceCollector, Measure: api.MeasureRU,
			Collector: api.CollectorStatus{Uptime: up}}
		for _, n := range []string{"acme", "globex"} {
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: n, RUPerSec: 10 * fill, DBLoad: 0.5 * fill, P95Seconds: 0.02, History: make([]float64, api.HistoryLen)})
		}
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "pgsteady", DBLoad: 3 * fill, History: make([]float64, api.HistoryLen)})
		b.snapshot(&s, now)
		b.add(&s, nil, nil)
		served = s
	}
	for _, r := range served.Tenants {
		if !r.FlaggedSince.IsZero() {
			t.Errorf("%s flagged since %v (baseline DB load %v, RU/s %v): its load never changed, only the window filled",
				r.Tenant, r.FlaggedSince.Sub(start), r.BaselineDBLoad, r.BaselineRUPerSec)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if tm := b.tenants["acme"]; tm == nil || tm.n[(start.Unix()/60+1)%baselineSlots] != 60 {
		t.Errorf("acme's second minute was not learnt whole: the book stopped learning")
	}
}
