package collector

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// The demo fleet: services × processes, each a real meter.Recorder whose
// report is handed to Consume every second, in process, as the collector
// merges a report a process's reporter POSTs.
const (
	demoProcesses   = 3   // per service
	demoRequests    = 100 // requests per second per process
	demoImportAfter = 5 * time.Second
	// demoJobRU is an import job's cost; demoImportRU the whole import's
	// rate at full speed (4 jobs a second on each catalog worker).
	demoJobRU    = 400
	demoImportRU = demoJobRU * 4 * demoProcesses
	// DemoImportTenant is the tenant whose catalog import starts a few
	// seconds into the demo.
	DemoImportTenant = "bigcorp"
)

var demoServices = []string{"storefront-api", "search-api", "catalog-worker"}

var demoTenants = []string{
	"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "cyberdyne",
	"soylent", "aperture", "blackmesa", "gringotts", "oscorp", "vandelay", "pied-piper", "monarch",
	"dunder-mifflin", "prestige", "duff", "krusty", "nakatomi", "massive-dynamic", "virtucon", "zorg",
	"bluth", "sterling-cooper", "los-pollos", "paper-street", "sirius", "veidt", "yoyodyne", "weyland",
	"tessier", "rekall", "omni", "gekko", "trust-safety", DemoImportTenant,
}

var demoRoutes = []string{"GET /products", "GET /search", "POST /orders", "GET /cart", "GET /reports"}

type demoProc struct {
	rec     *meter.Recorder
	service string
}

// demoFleet is the synthetic workload; all of its randomness comes from
// one seeded source, and its time from the server's clock.
type demoFleet struct {
	s     *Server
	rng   *rand.Rand
	zipf  *rand.Zipf
	keys  *rand.Zipf
	procs []demoProc
	start time.Time
	carry []float64 // per process: the limited import's fraction of a job
	// importAfter is when bigcorp's import begins (demoImportAfter).
	importAfter time.Duration
}

func newDemoFleet(s *Server, start time.Time) (*demoFleet, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := &demoFleet{
		s:     s,
		rng:   rng,
		zipf:  rand.NewZipf(rng, 1.1, 1, uint64(len(demoTenants)-2)),
		keys:  rand.NewZipf(rng, 1.2, 1, 50_000),
		start: start,
	}
	for _, svc := range demoServices {
		for i := range demoProcesses {
			src := report.Source{Service: svc, Instance: fmt.Sprintf("%s-%d-%d", svc, i, start.UnixNano()), Host: fmt.Sprintf("demo-%d", i)}
			now := start
			rec, err := meter.NewRecorder(meter.WithSource(src), meter.WithClock(func() time.Time { return now }))
			if err != nil {
				return nil, err
			}
			f.procs = append(f.procs, demoProc{rec: rec, service: svc})
		}
	}
	f.carry = make([]float64, len(f.procs))
	f.importAfter = demoImportAfter
	return f, nil
}

func demoTier(name string) tenant.Tier {
	switch name {
	case "trust-safety":
		return tenant.T0
	case DemoImportTenant:
		return tenant.T2
	}
	return tenant.Tier(len(name)%3 + 2) // T1…T3
}

// lognormal returns a latency around median with spread sigma.
func (f *demoFleet) lognormal(median float64, sigma float64) time.Duration {
	return time.Duration(median * math.Exp(sigma*f.rng.NormFloat64()) * float64(time.Second))
}

// importRate is the share of its full speed the import runs at now
// (ramp, cut by a throttle, a price or a fleet quota on bigcorp), and
// whether a policy limits it.
func (f *demoFleet) importRate(now time.Time, ramp float64) (rate float64, limited bool) {
	f.s.mu.Lock()
	effect := f.s.policy.For(tenant.Tags{Tenant: DemoImportTenant, Tier: tenant.T2}, now)
	var quota policy.QuotaLimit
	var quotaOK bool
	f.s.policy.read(func(p *policy.Policy) { quota, quotaOK = p.Quotas(now)(DemoImportTenant, tenant.T2) })
	f.s.mu.Unlock()
	rate = ramp
	if effect.Throttled {
		rate = ramp * min(1, effect.RUPerSecond/5000)
	}
	if effect.Multiplier > 1 {
		rate /= effect.Multiplier
	}
	// A fleet-wide quota admits the import's jobs up to its RU rate
	// across the catalog workers (a job costs demoJobRU).
	limited = effect.Throttled || effect.Multiplier > 1
	if quotaOK && !quota.Shadow {
		rate = min(rate, ramp*min(1, quota.RUPerSecond/demoImportRU))
		limited = true
	}
	return rate, limited
}

// step generates one second of load ending at now and hands every
// process's report to Consume.
func (f *demoFleet) step(now time.Time) {
	elapsed := now.Sub(f.start)
	// The import ramps up over 10 s and slows everything down with it,
	// unless a policy limits bigcorp.
	ramp := 0.0
	if elapsed > f.importAfter {
		ramp = min(1, (elapsed-f.importAfter).Seconds()/10)
	}
	importRate, limited := f.importRate(now, ramp)
	throttled := uint64(0)
	slow := 1 + 2*importRate // the database is saturated by the import
	for pi, p := range f.procs {
		var enf report.Enforcement
		n := demoRequests
		for range n {
			name := demoTenants[f.zipf.Uint64()]
			route := demoRoutes[f.rng.IntN(len(demoRoutes))]
			tags := tenant.Tags{Tenant: name, Route: route, Tier: demoTier(name),
				Key: fmt.Sprintf("product:%d", f.keys.Uint64())}
			d := f.lognormal(0.02*slow, 0.5)
			rows := int64(1 + f.rng.IntN(50))
			p.rec.Record(meter.Record{Time: now, Tags: tags, Kind: report.KindRequest, Duration: d,
				Rows: rows, Bytes: 2048 + rows*100, Err: f.rng.Float64() < 0.002*slow,
				RU: 1 + float64(rows)/10})
			for range 2 {
				p.rec.Record(meter.Record{Time: now, Tags: tags, Kind: report.KindDB,
					Duration: f.lognormal(0.001*slow, 0.6), Rows: rows})
			}
			enf.Admitted[demoTier(name).Index()]++
		}
		// The catalog worker processes run bigcorp's import.
		if p.service == "catalog-worker" && ramp > 0 {
			jobs := int(4*importRate + 0.5)
			if limited {
				// A limited import is slowed, not stopped: the jobs
				// a second carry over, so a rate under one job a
				// second still runs some.
				f.carry[pi] += 4 * importRate
				jobs = int(f.carry[pi])
				f.carry[pi] -= float64(jobs)
			}
			for range jobs {
				tags := tenant.Tags{Tenant: DemoImportTenant, Route: "POST /catalog/import", Tier: tenant.T2,
					Key: fmt.Sprintf("catalog:%d", f.rng.IntN(8))}
				d := f.lognormal(0.4*slow, 0.3)
				p.rec.Record(meter.Record{Time: now, Tags: tags, Kind: report.KindJob, Duration: d,
					Rows: 5000, Bytes: 1 << 20, RU: demoJobRU})
				for range 3 {
					p.rec.Record(meter.Record{Time: now, Tags: tags, Kind: report.KindDB,
						Duration: f.lognormal(0.2*slow, 0.4), Rows: 1700})
				}
			}
			if limited {
				throttled = uint64(max(0, int(4*ramp+0.5)-jobs))
				enf.Throttled[tenant.T2.Index()] += throttled
			}
		}
		if slow > 1.5 {
			enf.PriceMultiplier = [4]float64{1, 1, 1 + (slow-1.5)*2, 1 + (slow-1)*4}
			enf.Shed[3] = uint64(20 * (slow - 1.5))
		} else {
			enf.PriceMultiplier = [4]float64{1, 1, 1, 1}
		}
		rep := p.rec.Cut(now)
		rep.Enforcement = enf
		if _, err := f.s.Consume(context.Background(), rep, nil); err != nil {
			f.s.log.Warn("demo: report refused", "process", pi, "err", err)
		}
	}
}

// runDemo runs the demo fleet on s until ctx ends: a step every second.
func runDemo(ctx context.Context, s *Server) {
	f, err := newDemoFleet(s, s.cfg.Now())
	if err != nil {
		s.log.Error("demo fleet not started", "err", err)
		return
	}
	f.warm(f.start)
	s.log.Info("demo fleet started", "services", len(demoServices), "processes", len(f.procs),
		"tenants", len(demoTenants), "import_tenant", DemoImportTenant, "import_after", demoImportAfter)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.step(s.cfg.Now())
		}
	}
}

// warm gives each demo service five minutes of healthy latency history
// before the fleet starts, as a service that has been running would have,
// so that the latency ratio has a baseline to fall from when the import
// begins a few seconds in.
func (f *demoFleet) warm(now time.Time) {
	var h histogram.Histogram
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	for _, name := range demoServices {
		sv := f.s.view.service(name)
		if sv == nil {
			continue
		}
		sv.seen = now.Unix()
		for sec := -300; sec < 0; sec++ {
			h.Reset()
			for range 2 * demoRequests {
				h.ObserveDuration(f.lognormal(0.02, 0.5))
			}
			sv.sig.MergeAt(now.Add(time.Duration(sec)*time.Second), &h)
		}
	}
}
