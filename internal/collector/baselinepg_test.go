package collector

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/pgactivity"
)

// sessionsOf runs each statement on a session of its own on the real
// PostgreSQL and returns those sessions as one pg_stat_activity sample
// saw them, all active, in the order of stmts (the sample's other
// sessions, other tests', left out).
func sessionsOf(t *testing.T, dsn string, stmts ...string) []pgactivity.Backend {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pids := make([]int32, len(stmts))
	done := make(chan error, len(stmts))
	for i, q := range stmts {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pids[i]); err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := conn.Exec(ctx, q)
			done <- err
		}()
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sampler := pgactivity.NewSampler(pool)
	var got []pgactivity.Backend
	all := func() bool {
		snap, err := sampler.Sample(ctx)
		if err != nil {
			t.Logf("sample: %v", err)
			return false
		}
		got = got[:0]
		for _, pid := range pids {
			i := slices.IndexFunc(snap.Backends, func(b pgactivity.Backend) bool { return b.PID == pid && b.Active() })
			if i < 0 {
				return false
			}
			got = append(got, snap.Backends[i])
		}
		return true
	}
	if !waitUntil(10*time.Second, all) {
		t.Fatalf("sessions %v not all active in pg_stat_activity: %+v", pids, got)
	}
	cancel() // the statements end
	for range stmts {
		<-done
	}
	return got
}

// sampledAt returns the sessions as a sample at now saw them: their
// times moved by as much as the sample's, so that they started just
// before it.
func sampledAt(now time.Time, bs []pgactivity.Backend) pgactivity.Snapshot {
	out := make([]pgactivity.Backend, len(bs))
	for i, b := range bs {
		d := now.Add(-b.Duration).Sub(b.QueryStart)
		b.QueryStart, b.BackendStart = b.QueryStart.Add(d), b.BackendStart.Add(d)
		if !b.XactStart.IsZero() {
			b.XactStart = b.XactStart.Add(d)
		}
		out[i] = b
	}
	return pgactivity.Snapshot{Time: now, Backends: out}
}

// readOnce is a served snapshot as a qtop reading once gets it: through
// JSON, judged alone.
func readOnce(t *testing.T, s api.Snapshot) incident.Headline {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var read api.Snapshot
	if err := json.Unmarshal(raw, &read); err != nil {
		t.Fatal(err)
	}
	var once incident.Tracker
	return once.Add(&read)
}

// offenders is the part of a headline's line that names its offenders
// ("pgjob 80% of DB load, new load").
func offenders(h incident.Headline) string {
	o, _, _ := strings.Cut(h.Line, " · ")
	return o
}

// TestUntaggedFlagSameForEveryQtop: on a collector whose only source is
// PostgreSQL's sampler (collector serve --postgres), a job of four
// untagged sessions on the real PostgreSQL runs 30 s, and again 60 s
// after it ended. A qtop that watched from the start and one reading the
// served view once, at any second, name the same offenders: the second
// run is new load to both, as the collector's detector says (the flag of
// the first run's new load holds), where before the collector served
// nothing of the untagged row and the qtop reading once judged it on its
// history alone: nothing in the second run's first seconds, then "×3.7
// its baseline", while the qtop that watched said new load.
func TestUntaggedFlagSameForEveryQtop(t *testing.T) {
	dsn := testsvc.Postgres(t)
	const job = "SELECT pg_sleep(30)" // no tag: the untagged row
	bs := sessionsOf(t, dsn, "SELECT pg_sleep(30) /*tenant='acme'*/", job, job, job, job)
	if bs[0].Tenant != "acme" || slices.ContainsFunc(bs[1:], func(b pgactivity.Backend) bool { return b.Tenant != "" }) {
		t.Fatalf("sampled tenants: want acme and four untagged, got %+v", bs)
	}
	f := newFixture(t, func(c *Config) { c.Postgres = dsn }) // the sampler is not run: its samples are added below
	defer f.stop()
	h := httpAPI{f.s}
	ctx := t.Context()
	var live incident.Tracker
	var second string
	for sec := 1; sec <= 200; sec++ {
		now := f.clk.Add(time.Second)
		sessions := bs[:1]
		if sec >= 60 && sec < 90 || sec >= 150 && sec < 180 {
			sessions = bs
		}
		f.s.AddSample(sampledAt(now, sessions), time.Second)
		f.s.Tick(ctx, now)
		h.stepAutopilot(ctx)
		snap := f.s.Snapshot(now, api.MeasureRU, defaultTop)
		if snap.Source != api.SourcePostgres {
			t.Fatalf("source %q, want %q", snap.Source, api.SourcePostgres)
		}
		hl := live.Add(&snap)
		for _, measure := range []string{api.MeasureRU, api.MeasureDB} { // qtop --once, --once --sort db
			if ho := readOnce(t, f.s.Snapshot(now, measure, defaultTop)); offenders(hl) != offenders(ho) {
				t.Errorf("second %d: a qtop that watched says %q, one reading once (by %s) %q", sec, offenders(hl), measure, offenders(ho))
			}
		}
		if sec == 165 {
			second = offenders(hl)
		}
	}
	if want := "(untagged) 80% of DB load, new load"; second != want {
		t.Errorf("15 s into the second run: %q, want %q", second, want)
	}
}

// TestDBOnlyBaselineSameForEveryQtop: on a collector with a process
// reporting (acme's requests, a headline of RU) and PostgreSQL's sampler,
// a job's two sessions tagged pgjob on the real PostgreSQL, which no
// process reports (a row with DB load and no RU), run for five minutes,
// stop for 130 s and run again. The collector learnt pgjob's DB load and
// serves it (api.TenantRow.BaselineDBLoad), so its return to its usual
// load is no offender to a qtop that watched, nor to one reading once,
// nor to the collector's detector. Before, the collector served no
// DB-load baseline to a row it did not flag: the qtop that watched,
// having forgotten pgjob in its absence, named its return new load,
// while the collector (which knows the hour) and a qtop reading once
// named nothing.
func TestDBOnlyBaselineSameForEveryQtop(t *testing.T) {
	dsn := testsvc.Postgres(t)
	const stmt = "SELECT pg_sleep(30) /*tenant='pgjob'*/"
	job := sessionsOf(t, dsn, stmt, stmt)
	if job[0].Tenant != "pgjob" || job[1].Tenant != "pgjob" {
		t.Fatalf("sampled tenants: want pgjob twice, got %+v", job)
	}
	f := newFixture(t, func(c *Config) { c.Postgres = dsn })
	defer f.stop()
	f.s.feat.base.gap, f.s.feat.base.need = 1, 2 // baselines after four minutes, to keep the test short
	h := httpAPI{f.s}
	ctx := t.Context()
	acme := newProcess(f.clk, "api", "a1")
	var live incident.Tracker
	for sec := 1; sec <= 480; sec++ {
		now := f.clk.Add(time.Second)
		if f.ingest(acme.report(t, "acme", 100, "")) != 200 {
			t.Fatal("report refused")
		}
		var sessions []pgactivity.Backend
		if sec < 300 || sec >= 430 {
			sessions = job
		}
		f.s.AddSample(sampledAt(now, sessions), time.Second)
		f.s.Tick(ctx, now)
		h.stepAutopilot(ctx)
		snap := f.s.Snapshot(now, api.MeasureRU, defaultTop)
		if sec == 299 {
			if r := rowOf(snap, "pgjob"); r.RUPerSec != 0 || r.BaselineDBLoad != 2 {
				t.Fatalf("pgjob served %+v before it stops; want no RU and a DB-load baseline of 2", r)
			}
		}
		hl, ho := live.Add(&snap), readOnce(t, snap)
		if offenders(hl) != offenders(ho) {
			t.Errorf("second %d: a qtop that watched says %q, one reading once %q", sec, offenders(hl), offenders(ho))
		}
		if sec >= 430 && len(hl.Offenders) > 0 {
			t.Errorf("second %d, pgjob back at its usual load: %q", sec, offenders(hl))
		}
	}
}
