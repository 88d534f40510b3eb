package fleetsim

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	wire "github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

var (
	full     = flag.Bool("fleetsim.full", false, "run the full simulations (100 processes, 100 ms and 1 s intervals, about 2 minutes)")
	onlyColl = flag.Int("fleetsim.collectors", 0, "with -fleetsim.full: run only the configurations with this many collectors (1 or 3; 0: both)")
	onlyIv   = flag.Duration("fleetsim.interval", 0, "with -fleetsim.full: run only the configurations with this reporting interval (0: 100 ms and 1 s)")
	onlyScen = flag.String("fleetsim.scenario", "", "with -fleetsim.full: run only the scenarios whose name starts with this")
)

func TestMain(m *testing.M) {
	warmCodec()
	goleak.VerifyTestMain(m)
}

// warmCodec makes the report codec's shared zstd encoder and one pooled
// decoder outside any synctest bubble: made lazily inside one, their
// channels would belong to that bubble and the next run's bubble could
// not use them. The in-process transport (inProcess) decodes one report
// at a time, so the pooled decoder is the only one a run needs.
func warmCodec() {
	b, err := (&wire.Report{Source: wire.Source{Service: "warm"}, Start: time.Unix(0, 0), End: time.Unix(1, 0)}).MarshalBinary()
	if err == nil {
		err = new(wire.Report).UnmarshalBinary(b)
	}
	if err != nil {
		panic("fleetsim: report codec: " + err.Error())
	}
}

// scenario is one run.
type scenario struct {
	name       string
	procs      int
	collectors int // 1, or 3 summing through Redis
	interval   time.Duration
	limit      float64 // bigco's global limit, RU/s
	demand     func(t time.Duration) float64
	changeAt   time.Duration // the limit becomes newLimit then (0: never)
	newLimit   float64
	eventAt    time.Duration // when the demand (or limit) changes, for convergence
	length     time.Duration
}

// result is what a run measured.
type result struct {
	perSecond     []float64 // bigco admitted RU per measured second
	perInterval   []float64 // bigco admitted RU/s per interval from the start
	worstOver     float64   // max (admitted − limit) / limit over the seconds from one interval after the event
	worstUnder    float64   // max (limit − admitted) / limit
	settledOver   float64   // the same from three intervals after the event
	settledUnder  float64
	falseRefusals uint64 // refusals of the under-limit tenant
	smallAdmitted float64
	convergence   time.Duration // from eventAt to the first 5-interval window within 5 %
	// accepted and rejected reports at the collectors, and verdicts that
	// expired in the processes before a new answer came (the collector
	// late or busy: the local plan applied).
	accepted, rejected, expired float64
}

const (
	small      = "shop-a"
	smallLimit = 1000.0
	smallRate  = 300.0 // always under its limit
	slot       = 10 * time.Millisecond
	// cost is the RU of one request: small enough that each process
	// sees several requests per interval, large enough that the load
	// generator keeps up with a 10× burst on two cores.
	cost = 0.5
)

// simulate runs sc in a synctest bubble: every clock of the run (the
// load's slots, the reporters' intervals, the collectors' ticks and quota
// syncs, the sums' ages in Redis) is the bubble's fake clock, which
// advances only when every goroutine of the run waits for it. A round
// trip to Redis is not such a wait, so the clock stands still during it:
// the outcome does not depend on how busy the machine is.
func simulate(t *testing.T, sc scenario) result {
	t.Helper()
	redisAddr := ""
	if sc.collectors > 1 {
		redisAddr = testsvc.Redis(t)
	}
	var r result
	synctest.Test(t, func(t *testing.T) { r = run(t, sc, redisAddr) })
	return r
}

// inProcess is a RoundTripper that serves each request with a collector's
// handler in the calling goroutine: no socket, whose accept loop would
// keep the bubble's clock from advancing. One request at a time (the
// clock stands still while one is served, so this changes no outcome):
// the codec's pooled decoder (warmCodec) is then always free.
type inProcess struct {
	h  http.Handler
	mu *sync.Mutex
}

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req := r.Clone(r.Context())
	req.RemoteAddr, req.RequestURI = "127.0.0.1:1", r.URL.RequestURI()
	w := httptest.NewRecorder()
	p.h.ServeHTTP(w, req)
	return w.Result(), nil
}

// fleet is one run's collectors, processes and tallies.
type fleet struct {
	sc        scenario
	servers   []*collector.Server
	handlers  []http.Handler
	regs      []*prometheus.Registry
	serve     sync.Mutex // one request at a time (inProcess)
	gates     []*quota.Gate
	enfs      []*enforce.Enforcer
	reporters []*meter.Reporter

	admitted               []atomic.Uint64 // bigco RU × 1000 per slot
	smallRefused, smallAdm atomic.Uint64
}

func rule(id, name string, ru float64) policy.Rule {
	return policy.Rule{ID: id, Tenant: name, Action: policy.Quota, RUPerSecond: ru, Expires: time.Now().Add(time.Hour), Reason: "simulation"}
}

func run(t *testing.T, sc scenario, redisAddr string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fleet{sc: sc, admitted: make([]atomic.Uint64, int(sc.length/slot)+1)}
	f.startCollectors(ctx, t, redisAddr)
	defer f.stopCollectors()
	f.startProcesses(t)
	defer f.stopProcesses()
	if sc.changeAt > 0 {
		time.AfterFunc(sc.changeAt, func() {
			for _, s := range f.servers {
				if _, err := s.SetRule(ctx, rule("big", "bigco", sc.newLimit), "sim"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	f.offer()
	res := f.measure()
	if testing.Verbose() {
		t.Logf("%s: admitted RU/s per interval: %s", sc.name, fmtSeconds(res.perInterval))
	}
	return res
}

// startCollectors starts the collectors, each with bigco's and shop-a's
// quota rules.
func (f *fleet) startCollectors(ctx context.Context, t *testing.T, redisAddr string) {
	sc := f.sc
	// The Redis is shared: this run's keys are its own.
	prefix := fmt.Sprintf("{qtop-fleetsim-%d}:", rand.Uint64())
	for i := range sc.collectors {
		reg := prometheus.NewRegistry()
		// QuotaClock is given so that the collectors date their quota sums
		// in Redis by the bubble's clock, not by Redis's.
		s, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(), Registerer: reg, Now: time.Now,
			IntakeConfig: collector.IntakeConfig{SourceRate: 1000}, Writer: fmt.Sprintf("sim-%d", i),
			QuotaConfig: collector.QuotaConfig{QuotaRedis: redisAddr, QuotaSync: sc.interval, QuotaPrefix: prefix, QuotaClock: time.Now}})
		if err != nil {
			t.Fatal(err)
		}
		f.servers, f.handlers, f.regs = append(f.servers, s), append(f.handlers, s.Handler()), append(f.regs, reg)
		for _, r := range []policy.Rule{rule("big", "bigco", sc.limit), rule("small", small, smallLimit)} {
			if _, err := s.SetRule(ctx, r, "sim"); err != nil {
				t.Fatal(err)
			}
		}
		// Collector i starts (and syncs through Redis) i+1 ms into each
		// interval: no two collectors sync at the same instant, nor with
		// a report or a load slot, so the order of every event is fixed.
		time.AfterFunc(time.Duration(i+1)*time.Millisecond, func() { s.Run(ctx) })
	}
}

func (f *fleet) stopCollectors() {
	for _, s := range f.servers {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		s.Shutdown(sctx)
		c()
	}
}

// startProcesses makes each process's gate, enforcer and reporter, and
// starts the reporters.
func (f *fleet) startProcesses(t *testing.T) {
	sc := f.sc
	f.gates, f.enfs, f.reporters = make([]*quota.Gate, sc.procs), make([]*enforce.Enforcer, sc.procs), make([]*meter.Reporter, sc.procs)
	for i := range sc.procs {
		g, err := quota.NewGate(quota.WithDefaultCost(cost))
		if err != nil {
			t.Fatal(err)
		}
		// Each process keeps today's per-process plan (the tenant's limit
		// in every process) as its local bucket: defence in depth, and
		// what applies when the collector's answer expires.
		plan := enforce.Plan{Limit: enforce.Limit{RUPerSecond: sc.limit, Burst: sc.limit}, Weight: 1}
		if f.enfs[i], err = enforce.New(enforce.WithQuota(g), enforce.WithPlans(map[string]enforce.Plan{enforce.PlanFree: plan})); err != nil {
			t.Fatal(err)
		}
		rec, err := meter.NewRecorder(meter.WithSource(wire.Source{Service: "sim", Instance: fmt.Sprintf("p%03d", i)}))
		if err != nil {
			t.Fatal(err)
		}
		c := i % len(f.servers)
		url := fmt.Sprintf("http://collector-%d/v1/reports", c)
		r, err := meter.NewReporter(url, rec, meter.WithInterval(sc.interval), meter.WithQuota(g), meter.WithTimeout(time.Second),
			meter.WithHTTPClient(&http.Client{Transport: inProcess{f.handlers[c], &f.serve}}))
		if err != nil {
			t.Fatal(err)
		}
		f.gates[i], f.reporters[i] = g, r
	}
	// Each process starts its reporter at its own phase, as a fleet does,
	// a quarter slot off the load's slots and off the collectors' syncs.
	for i, r := range f.reporters {
		time.AfterFunc(slot/4+time.Duration(i)*sc.interval/time.Duration(sc.procs), r.Start)
	}
}

func (f *fleet) stopProcesses() {
	for _, r := range f.reporters {
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		r.Shutdown(sctx)
		c()
	}
}

// offer is the load, for the scenario's length: every slot, each process
// offers its share of each tenant's demand in requests of cost RU (the
// remainder carried over).
func (f *fleet) offer() {
	start := time.Now()
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owedBig, owedSmall := make([]float64, f.sc.procs), make([]float64, f.sc.procs)
			tick := time.NewTicker(slot)
			defer tick.Stop()
			var last time.Duration
			for {
				now := <-tick.C
				el := now.Sub(start)
				if el >= f.sc.length {
					return
				}
				// The demand of the time since the last tick (on the
				// bubble's clock, one slot).
				dt := (el - last).Seconds()
				last = el
				for p := w; p < f.sc.procs; p += workers {
					owedBig[p] += f.sc.demand(el) * dt / float64(f.sc.procs)
					owedSmall[p] += smallRate * dt / float64(f.sc.procs)
					f.offerProcess(p, now, int(el/slot), &owedBig[p], &owedSmall[p])
				}
			}
		}()
	}
	wg.Wait()
}

// offerProcess offers process p's owed requests at now, in slot k.
func (f *fleet) offerProcess(p int, now time.Time, k int, owedBig, owedSmall *float64) {
	big, sm := tenant.Tags{Tenant: "bigco", Tier: tenant.T2}, tenant.Tags{Tenant: small, Tier: tenant.T2}
	e := f.enfs[p]
	for ; *owedBig >= cost; *owedBig -= cost {
		if e.AllowAt(now, big).Admitted() {
			e.ChargeAt(now, big, cost)
			f.admitted[k].Add(uint64(cost * 1000))
		}
	}
	for ; *owedSmall >= cost; *owedSmall -= cost {
		if e.AllowAt(now, sm).Admitted() {
			e.ChargeAt(now, sm, cost)
			f.smallAdm.Add(1)
		} else {
			f.smallRefused.Add(1)
		}
	}
}

func (f *fleet) limitAt(el time.Duration) float64 {
	if f.sc.changeAt > 0 && el >= f.sc.changeAt {
		return f.sc.newLimit
	}
	return f.sc.limit
}

// sum is bigco's admitted RU in [from, to).
func (f *fleet) sum(from, to time.Duration) float64 {
	var s uint64
	for k := int(from / slot); k < int(to/slot) && k < len(f.admitted); k++ {
		s += f.admitted[k].Load()
	}
	return float64(s) / 1000
}

// measure is the run's result.
func (f *fleet) measure() result {
	sc := f.sc
	var res result
	// Per second, from one interval after the event (the goal's "after
	// the first interval"), and from three.
	for from := sc.eventAt + sc.interval; from+time.Second <= sc.length; from += time.Second {
		a, lim := f.sum(from, from+time.Second), f.limitAt(from)
		res.perSecond = append(res.perSecond, a)
		res.worstOver = max(res.worstOver, (a-lim)/lim)
		res.worstUnder = max(res.worstUnder, (lim-a)/lim)
	}
	for from := sc.eventAt + 3*sc.interval; from+time.Second <= sc.length; from += time.Second {
		a, lim := f.sum(from, from+time.Second), f.limitAt(from)
		res.settledOver = max(res.settledOver, (a-lim)/lim)
		res.settledUnder = max(res.settledUnder, (lim-a)/lim)
	}
	res.convergence = f.convergence()
	for from := time.Duration(0); from+sc.interval <= sc.length; from += sc.interval {
		res.perInterval = append(res.perInterval, f.sum(from, from+sc.interval)/sc.interval.Seconds())
	}
	res.falseRefusals = f.smallRefused.Load()
	res.smallAdmitted = float64(f.smallAdm.Load())
	for _, reg := range f.regs {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "qtop_collector_reports_total":
					res.accepted += m.GetCounter().GetValue()
				case "qtop_collector_reports_rejected_total":
					res.rejected += m.GetCounter().GetValue()
				}
			}
		}
	}
	for _, g := range f.gates {
		res.expired += float64(g.Stats().Expired)
	}
	return res
}

// convergence is the time from the event to the first window of 5
// intervals (one interval holds too few requests of 20 processes to
// measure 5 %) whose admitted rate is within 5 % of the limit (−1: none);
// that it stays there is what the per-second figures say.
func (f *fleet) convergence() time.Duration {
	sc := f.sc
	if sc.eventAt <= 0 {
		return -1
	}
	w := max(5*sc.interval, time.Second/2)
	for from := sc.eventAt; from+w <= sc.length; from += sc.interval {
		rate := f.sum(from, from+w) / w.Seconds()
		if lim := f.limitAt(from); math.Abs(rate-lim)/lim <= 0.05 {
			return from - sc.eventAt
		}
	}
	return -1
}

func steady(limit float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return 2 * limit }
}

// jump is half the limit (a fleet that has been running under it) until
// at, then factor times the limit.
func jump(limit, factor float64, at time.Duration) func(time.Duration) float64 {
	return func(el time.Duration) float64 {
		if el < at {
			return 0.5 * limit
		}
		return factor * limit
	}
}

func scenarios(procs int, interval time.Duration, length time.Duration, collectors int) []scenario {
	const lim = 1000
	b := length / 3
	return []scenario{
		{name: "overload 2×", procs: procs, collectors: collectors, interval: interval, limit: lim, demand: jump(lim, 2, b), eventAt: b, length: length},
		{name: "burst 10×", procs: procs, collectors: collectors, interval: interval, limit: lim, demand: jump(lim, 10, b), eventAt: b, length: length},
		{name: "limit 1000→500", procs: procs, collectors: collectors, interval: interval, limit: lim, demand: steady(lim), changeAt: b, newLimit: 500, eventAt: b, length: length},
	}
}

func report(t *testing.T, sc scenario, r result) string {
	conv := "–"
	if sc.eventAt > 0 {
		conv = "never"
		if r.convergence >= 0 {
			conv = fmt.Sprintf("%v (%.1f intervals)", r.convergence, r.convergence.Seconds()/sc.interval.Seconds())
		}
	}
	line := fmt.Sprintf("| %s | %d | %d | %v | %+.1f%% / %+.1f%% | %+.1f%% / %+.1f%% | %d | %s | %.0f / %.0f / %.0f |", sc.name, sc.procs, sc.collectors, sc.interval,
		100*r.worstOver, -100*r.worstUnder, 100*r.settledOver, -100*r.settledUnder, r.falseRefusals, conv, r.accepted, r.rejected, r.expired)
	t.Logf("%s per-second admitted %v", sc.name, fmtSeconds(r.perSecond))
	return line
}

func fmtSeconds(v []float64) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%.0f", x)
	}
	return b.String()
}

// TestSimulationShort is the CI version: 20 processes, 100 ms intervals,
// one collector, 4 seconds per scenario, and the overload with three
// collectors summing through Redis, checked against the goal itself; and
// the 10× burst at 1 s intervals with three collectors and 100 processes
// (the hardest of the full table), checked at the goal from three
// intervals after the burst and at ±10 % from one: its first measured
// seconds are up to 5 % off the limit (with 21 processes up to 10 %: the
// allowances of the second interval are computed from shares half of
// which were reported before the burst; see bench/README.md).
func TestSimulationShort(t *testing.T) {
	if *full {
		t.Skip("the full run is TestSimulation")
	}
	runs := scenarios(20, 100*time.Millisecond, 4*time.Second, 1)
	three := scenarios(21, 100*time.Millisecond, 4*time.Second, 3)[0]
	three.name += ", 3 collectors"
	slow := scenarios(100, time.Second, 9*time.Second, 3)[1]
	slow.name += ", 3 collectors, 1 s"
	for _, sc := range append(runs, three, slow) {
		t.Run(sc.name, func(t *testing.T) {
			first := goal
			if sc.interval >= time.Second {
				first = 2 * goal
			}
			r := simulate(t, sc)
			t.Log(report(t, sc, r))
			if errs := check(sc, r, first); len(errs) > 0 {
				t.Error(strings.Join(errs, "; "))
			}
		})
	}
}

// TestSimulationDeterministic: two runs of the overload with three
// collectors summing through Redis admit exactly the same RU in every
// interval and count the same reports and verdicts: the simulation's
// outcome depends on the algorithm alone, not on the machine's load.
func TestSimulationDeterministic(t *testing.T) {
	if *full {
		t.Skip("the full run is TestSimulation")
	}
	sc := scenarios(21, 100*time.Millisecond, 2*time.Second, 3)[0]
	a, b := simulate(t, sc), simulate(t, sc)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// goal is the largest error of admitted RU per second against the limit.
const goal = 0.05

// check returns how r misses the goal: admitted RU per second within 5 %
// of the limit from one interval after the event (within first of it in
// the seconds before three intervals after), no refusal of the tenant
// under its limit, and the first window within 5 % at most 2 intervals
// after the event.
func check(sc scenario, r result, first float64) []string {
	var errs []string
	if r.falseRefusals > 0 {
		errs = append(errs, fmt.Sprintf("%s: the under-limit tenant was refused %d times", sc.name, r.falseRefusals))
	}
	if r.smallAdmitted == 0 {
		errs = append(errs, fmt.Sprintf("%s: the under-limit tenant admitted nothing", sc.name))
	}
	if len(r.perSecond) == 0 {
		return append(errs, fmt.Sprintf("%s: no second measured", sc.name))
	}
	if r.worstOver > first || r.worstUnder > first {
		errs = append(errs, fmt.Sprintf("%s: admitted per second from 1 interval after the event off the limit by up to %+.1f%% / %+.1f%% (checked at ±%.0f%%, goal ±%.0f%%)",
			sc.name, 100*r.worstOver, -100*r.worstUnder, 100*first, 100*goal))
	}
	if r.settledOver > goal || r.settledUnder > goal {
		errs = append(errs, fmt.Sprintf("%s: admitted per second from 3 intervals after the event off the limit by up to %+.1f%% / %+.1f%% (goal ±%.0f%%)",
			sc.name, 100*r.settledOver, -100*r.settledUnder, 100*goal))
	}
	if sc.eventAt > 0 && (r.convergence < 0 || r.convergence > 2*sc.interval) {
		errs = append(errs, fmt.Sprintf("%s: converged after %v; the goal is 2 intervals (%v)", sc.name, r.convergence, 2*sc.interval))
	}
	return errs
}

// TestSimulation is the full run behind -fleetsim.full.
func TestSimulation(t *testing.T) {
	if !*full {
		t.Skip("run with -fleetsim.full")
	}
	lines := []string{"| scenario | processes | collectors | interval | worst second over / under, from 1 interval after | from 3 intervals after | false refusals | convergence (first 5-interval window within 5 %) | reports accepted / rejected, verdicts expired |", "|---|---|---|---|---|---|---|---|---|"}
	for _, collectors := range []int{1, 3} {
		if *onlyColl != 0 && collectors != *onlyColl {
			continue
		}
		for _, iv := range []time.Duration{100 * time.Millisecond, time.Second} {
			if *onlyIv != 0 && iv != *onlyIv {
				continue
			}
			for _, sc := range scenarios(100, iv, max(6*time.Second, 9*iv), collectors) {
				if !strings.HasPrefix(sc.name, *onlyScen) {
					continue
				}
				r := simulate(t, sc)
				lines = append(lines, report(t, sc, r))
			}
		}
	}
	fmt.Fprintln(os.Stdout, strings.Join(lines, "\n"))
}
