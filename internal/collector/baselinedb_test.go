package collector

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
)

// dbJobAt is second sec of a fleet (acme and globex, 10 RU/s and DB load
// 0.5 each) on a collector up for up, and from second job on a job's
// sessions no process reports (pgnoisy: DB load 4, no RU).
func dbJobAt(start time.Time, sec, job int, up time.Duration) api.Snapshot {
	s := api.Snapshot{Time: start.Add(time.Duration(sec) * time.Second), Window: 10 * time.Second, Source: api.SourceCollector,
		Measure: api.MeasureRU, Collector: api.CollectorStatus{Uptime: up}}
	for _, n := range []string{"acme", "globex"} {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: n, RUPerSec: 10, DBLoad: 0.5, P95Seconds: 0.02, History: make([]float64, api.HistoryLen)})
	}
	if sec >= job {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "pgnoisy", DBLoad: 4, History: make([]float64, api.HistoryLen)})
	}
	return s
}

// TestBaselineDBOnlyFlagKeptAcrossRestart: a job no process reports
// (pgnoisy, DB load and no RU) starts ten minutes into a collector's
// life, once its baselines formed, and is flagged as new DB load. The
// collector restarts 40 s later on the same data folder: it still flags
// the job, as the book learnt that pgnoisy had no DB load in the hour
// before, and a qtop started then names it. Before, the restarted
// collector's detector saw the job from its first second, took it for
// load there since before, and no longer named a job it named before.
// The same holds for a book saved by a collector from before DB load was
// kept: its minutes load, with no DB load.
func TestBaselineDBOnlyFlagKeptAcrossRestart(t *testing.T) {
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	const job, restart, end = 600, 640, 700
	file := filepath.Join(t.TempDir(), baselinesFile)
	served := feedDBJob(t, file, start, 0, restart, job)
	if r := rowOf(served, "pgnoisy"); r.FlaggedSince.IsZero() {
		t.Fatalf("before the restart: pgnoisy not flagged: %+v", r)
	}
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, saved := range map[string][]byte{"saved": old, "saved before DB load was kept": oldBaselines(t, old)} {
		if err := os.WriteFile(file, saved, 0o600); err != nil {
			t.Fatal(err)
		}
		again := newBaselineBook()
		if err := again.load(file); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again.file = ""
		for sec := restart; sec < end; sec++ {
			served = dbJobAt(start, sec, job, time.Duration(sec-restart+1)*time.Second)
			again.snapshot(&served, served.Time)
			again.add(&served, nil, nil)
		}
		r := rowOf(served, "pgnoisy")
		if r.FlaggedSince.IsZero() || r.BaselineDBLoad != 0 {
			t.Errorf("%s: after the restart pgnoisy is served %+v; want it flagged as new DB load", name, r)
			continue
		}
		var late incident.Tracker
		if h := late.Add(&served); !strings.HasPrefix(h.Line, "pgnoisy 80% of DB load, new load") {
			t.Errorf("%s: a qtop started after the restart: %q", name, h.Line)
		}
	}
}

// oldBaselines is a saved book as a collector from before DB load and
// the seconds learnt were kept wrote it: five sums a minute, no "learnt".
func oldBaselines(t *testing.T, saved []byte) []byte {
	t.Helper()
	var d baselinesOnDisk
	if err := json.Unmarshal(saved, &d); err != nil {
		t.Fatal(err)
	}
	type oldDisk struct {
		Version  int                     `json:"version"`
		Tenants  map[string][][5]float64 `json:"tenants"`
		Services map[string][][5]float64 `json:"services,omitempty"`
	}
	o := oldDisk{Version: d.Version, Tenants: map[string][][5]float64{}}
	for name, ms := range d.Tenants {
		for _, x := range ms {
			o.Tenants[name] = append(o.Tenants[name], [5]float64(x[:5]))
		}
	}
	out, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBaselineFlagTimeKeptAcrossRestart: the job flagged at 4:10 is still
// flagged since then by a collector restarted at 4:11:40 on the same data
// folder (the book saved at 4:11 holds the flag's time), not since the
// restarted detector's first flag, about 12 s after the restart.
func TestBaselineFlagTimeKeptAcrossRestart(t *testing.T) {
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	const job, restart, end = 600, 700, 760
	file := filepath.Join(t.TempDir(), baselinesFile)
	since := rowOf(feedDBJob(t, file, start, 0, restart, job), "pgnoisy").FlaggedSince
	if since.IsZero() || since.After(start.Add(job*time.Second+15*time.Second)) {
		t.Fatalf("before the restart: pgnoisy flagged since %v", since)
	}
	if got := rowOf(feedDBJob(t, file, start, restart, end, job), "pgnoisy").FlaggedSince; !got.Equal(since) {
		t.Errorf("after the restart: pgnoisy flagged since %v, want %v (its first flag)", got, since)
	}
}

// feedDBJob runs a book on file (saved there at each minute's turn) from
// second from, when it starts, to second to of dbJobAt's fleet, the job
// from second job on, and returns the last snapshot served.
func feedDBJob(t *testing.T, file string, start time.Time, from, to, job int) api.Snapshot {
	t.Helper()
	b := newBaselineBook()
	if err := b.load(file); err != nil {
		t.Fatal(err)
	}
	var served api.Snapshot
	for sec := from; sec < to; sec++ {
		served = dbJobAt(start, sec, job, time.Duration(sec-from+1)*time.Second)
		b.snapshot(&served, served.Time)
		b.add(&served, nil, nil)
	}
	return served
}
