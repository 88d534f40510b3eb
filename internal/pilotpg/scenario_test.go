package pilotpg

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/policy"
)

// envOptIn runs the scenario: it takes about two and a half minutes of
// real time against the real PostgreSQL.
const envOptIn = "QTOP_AUTOPILOT_PG"

// The scenario's phases. warm gives every tenant a baseline: the victims'
// is the lower quartile of their p95 older than 30 s (incident), so the
// noise starts after 45 s. The noise lasts until the apply and then, in
// enforce, until the victims are back for sustain seconds and at least
// after seconds have passed (the offender's admitted work afterwards),
// in shadow for shadowTail; noiseMax bounds it either way.
const (
	warm       = 45 * time.Second
	sustain    = 5
	after      = 15 * time.Second
	shadowTail = 6 * time.Second
	noiseMax   = 120 * time.Second
)

// second is what one second of a run looked like.
type second struct {
	at time.Duration // from the noise's start (negative before)
	// hurt counts the victims at ≥ 1.5× their baseline p95 in qtop's
	// headline (an incident.Tracker fed the collector's snapshot each
	// second, as qtop would show it); worst is the largest such factor.
	hurt  int
	worst float64
	// noisyRU is the noisy tenant's RU/s in the snapshot (10 s window).
	noisyRU float64
	// admitted and refused are the noisy tenant's jobs this second, as
	// its clients saw them; clientP95 the victims' p95 over this second,
	// as theirs did.
	admitted, refused int64
	clientP95         time.Duration
	applied           bool // the autopilot has an active action
}

// run is one run of the scenario.
type run struct {
	mode       policy.AutopilotMode
	noiseStart time.Time
	secs       []second
	decisions  []autopilot.Decision // oldest first
	// clientBase is the victims' p95 over the 30 s before the noise, as
	// their clients saw it.
	clientBase time.Duration
	// throttled and shadowThrottled are the noisy tier's refusals summed
	// over the processes, applied and counted in shadow.
	throttled, shadowThrottled uint64
}

// TestAutopilotOnPostgres runs the scenario with the default rule in
// enforce, then in shadow. In enforce the autopilot applies a fleet quota
// to the noisy tenant, after the noise starts, with no human; the victims
// recover after it; the noisy tenant still admits work, fewer jobs a
// second than before the limit. In shadow the first apply names the same
// tenant within one interval of enforce's (from the noise's start), and
// the agents refuse none of its work (the shadow quota is counted only).
func TestAutopilotOnPostgres(t *testing.T) {
	if os.Getenv(envOptIn) != "1" {
		t.Skip("opt-in, about 2.5 min of real time on the real PostgreSQL: " + envOptIn + "=1")
	}
	dsn := pgbenchDB(t)
	rule := autopilot.Default().Rules[0].Defaults()
	enf := runScenario(t, dsn, policy.AutopilotEnforce)
	enf.log(t)
	checkEnforce(t, enf, rule)
	sh := runScenario(t, dsn, policy.AutopilotShadow)
	sh.log(t)
	checkShadow(t, sh, enf, rule)
}

// runScenario runs the scenario once with the default rule in mode.
func runScenario(t *testing.T, dsn string, mode policy.AutopilotMode) *run {
	t.Helper()
	srv, base := startCollector(t)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	rules := autopilot.Default()
	rules.Rules[0].Mode = mode
	postJSON(t, base+collector.PathAutopilotPolicy, srv.Token(), rules)
	svc := newServices(t, base, dsn)
	defer svc.shutdown()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	lat := &clientLatencies{}
	var nc noisyCounts
	for _, v := range victims {
		wg.Go(func() { svc.victim(ctx, v, lat) })
	}
	wg.Go(func() { svc.noisyAtRest(ctx, &nc) })

	r := &run{mode: mode}
	sm := &sampler{srv: srv, lat: lat, nc: &nc, start: time.Now().Add(warm)}
	sm.every(ctx, func(s second) bool { r.secs = append(r.secs, s); return s.at >= 0 })
	r.noiseStart = time.Now()
	sm.start = r.noiseStart
	r.clientBase = lat.p95(r.noiseStart.Add(-30*time.Second), r.noiseStart)
	noiseCtx, stopNoise := context.WithCancel(ctx)
	for range noiseWorkers {
		wg.Go(func() { svc.noise(noiseCtx, &nc) })
	}
	sm.every(ctx, func(s second) bool {
		r.secs = append(r.secs, s)
		return s.at >= noiseMax || r.done()
	})
	stopNoise()
	r.throttled, r.shadowThrottled = svc.throttled()
	r.decisions = decisions(t, base, srv.Token())
	return r
}

// done says whether the noise phase has shown what it is for: in
// enforce, the victims back for sustain seconds, after seconds since the
// apply and a job of the noisy tenant admitted again from 3 s after it
// (the scans in flight when the quota arrives are charged to its
// allowance as debt, which it pays back first); in shadow, shadowTail
// since the apply.
func (r *run) done() bool {
	applied := -1
	for i, s := range r.secs {
		if s.applied && s.at >= 0 {
			applied = i
			break
		}
	}
	if applied < 0 {
		return false
	}
	since := r.secs[len(r.secs)-1].at - r.secs[applied].at
	if r.mode == policy.AutopilotShadow {
		return since >= shadowTail
	}
	return since >= after && r.healedAt(applied, func(s second) bool { return s.hurt < victimsMin() }) >= 0 &&
		r.rate(min(applied+3, len(r.secs)), len(r.secs)) > 0
}

// healedAt is the index of the first second after from from which ok
// holds for sustain seconds in a row (-1: none).
func (r *run) healedAt(from int, ok func(second) bool) int {
	run := 0
	for i := from + 1; i < len(r.secs); i++ {
		if !ok(r.secs[i]) {
			run = 0
			continue
		}
		if run++; run == sustain {
			return i - sustain + 1
		}
	}
	return -1
}

func victimsMin() int { return autopilot.Default().Rules[0].Defaults().VictimsMin }

// sampler reads the collector's live view once a second, as qtop does.
type sampler struct {
	srv   *collector.Server
	lat   *clientLatencies
	nc    *noisyCounts
	start time.Time
	tr    incident.Tracker
	last  [2]int64
}

// every takes a sample each second until stop says so or ctx ends.
func (sm *sampler) every(ctx context.Context, stop func(second) bool) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if stop(sm.sample(now)) {
				return
			}
		}
	}
}

func (sm *sampler) sample(now time.Time) second {
	snap := sm.srv.Snapshot(now, api.MeasureRU, 1000)
	h := sm.tr.Add(&snap)
	s := second{at: now.Sub(sm.start), clientP95: sm.lat.p95(now.Add(-time.Second), now)}
	for _, v := range h.Victims {
		if isVictim(v.Tenant) && v.Factor() >= incident.VictimP95 {
			s.hurt++
			s.worst = max(s.worst, v.Factor())
		}
	}
	for _, row := range snap.Tenants {
		if row.Tenant == noisy.Tenant {
			s.noisyRU = row.RUPerSec
		}
	}
	s.applied = snap.Autopilot != nil && len(snap.Autopilot.Active) > 0
	a, f := sm.nc.admitted.Load(), sm.nc.refused.Load()
	s.admitted, s.refused = a-sm.last[0], f-sm.last[1]
	sm.last = [2]int64{a, f}
	return s
}

func isVictim(name string) bool {
	for _, v := range victims {
		if v.Tenant == name {
			return true
		}
	}
	return false
}

// startCollector starts a collector on a loopback port with no store.
func startCollector(t *testing.T) (*collector.Server, string) {
	t.Helper()
	srv, err := collector.New(collector.Config{Listen: "127.0.0.1:0", Store: collector.StoreNone, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv, "http://" + srv.Addr()
}

// postJSON posts v to url as the admin, and fails unless it is taken.
func postJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
}

// decisions reads the autopilot's decisions, oldest first.
func decisions(t *testing.T, base, token string) []autopilot.Decision {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+api.PathAutopilot, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Decisions []autopilot.Decision `json:"decisions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET %s: %s: %v", api.PathAutopilot, resp.Status, err)
	}
	out := make([]autopilot.Decision, 0, len(st.Decisions))
	for i := len(st.Decisions) - 1; i >= 0; i-- {
		out = append(out, st.Decisions[i])
	}
	return out
}
