package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// History describes a synthetic history of many tenants, as the collector
// would have written it: most tenants idle most minutes, activity and load
// skewed over the tenants (a few busy all the time, a long tail seen now
// and then), several routes, services and kinds per tenant, latency
// histograms. The same History and Seed always give the same rows.
type History struct {
	Tenants int       // distinct tenants
	From    time.Time // first minute (truncated to the minute)
	Minutes int       // minutes from From
	// Active is the mean fraction of tenants with load in a minute
	// (default 0.1): the busiest tenants are active every minute, the
	// rest less the lower their rank.
	Active float64
	// Skew is the exponent of the Zipf-like law of activity and load
	// over the tenants' ranks (default 1.1).
	Skew    float64
	Writers int    // collectors that wrote the rows (default 2)
	Seed    uint64 // the rows' random source
}

// ErrHistory reports a History that cannot be generated.
var ErrHistory = errors.New("storetest: invalid history")

var (
	genRoutes = []string{"/api/orders", "/api/orders/:id", "/api/products", "/api/products/:id", "/api/search",
		"/api/cart", "/api/checkout", "/api/users/:id", "/api/invoices", "/api/reports", "/api/export",
		"/api/import", "/api/webhooks", "/api/auth/token", "/graphql", "/healthz"}
	genJobs     = []string{"job:export", "job:import", "job:reindex", "job:billing"}
	genServices = []string{"api", "web", "gateway"}
)

// genTenant is what stays the same about one tenant for the whole history.
type genTenant struct {
	name    string
	active  float64 // probability of load in a minute
	load    float64 // mean requests per active minute
	tier    tenant.Tier
	routes  []string
	service string
	writer  int
}

// Generate calls write with the history's rows in batches of about batch
// rows (whole minutes; at least one minute per call), oldest first. The
// rows are valid for store.Store's Write* and carry Version 1.
func (h History) Generate(batch int, write func([]store.Rollup) error) error {
	tenants, err := h.tenants()
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(h.Seed, 0x9e3779b97f4a7c15))
	from := h.From.UTC().Truncate(time.Minute)
	writers := max(h.Writers, 1)
	rows := make([]store.Rollup, 0, batch+1024)
	for m := 0; m < h.Minutes; m++ {
		minute := from.Add(time.Duration(m) * time.Minute)
		for i := range tenants {
			t := &tenants[i]
			if rng.Float64() >= t.active {
				continue
			}
			w := t.writer
			if rng.IntN(10) == 0 { // now and then a tenant's processes report to another collector too
				w = rng.IntN(writers)
			}
			rows = t.minute(rows, rng, minute, fmt.Sprintf("collector-%d", w))
		}
		if len(rows) >= batch || m == h.Minutes-1 {
			if err := write(rows); err != nil {
				return err
			}
			rows = rows[:0]
		}
	}
	return nil
}

// tenants draws every tenant's fixed traits; ranks are shuffled over the
// names so that activity does not follow the names' order.
func (h History) tenants() ([]genTenant, error) {
	if h.Tenants <= 0 || h.Minutes <= 0 || h.From.IsZero() {
		return nil, fmt.Errorf("%w: want tenants, minutes and a first minute, got %d, %d, %v", ErrHistory, h.Tenants, h.Minutes, h.From)
	}
	active, skew := h.Active, h.Skew
	if active == 0 {
		active = 0.1
	}
	if skew == 0 {
		skew = 1.1
	}
	if active < 0 || active > 1 || skew < 0 || math.IsNaN(active) || math.IsNaN(skew) {
		return nil, fmt.Errorf("%w: active %v must be in (0, 1], skew %v ≥ 0", ErrHistory, active, skew)
	}
	rng := rand.New(rand.NewPCG(h.Seed, 1))
	ranks := rng.Perm(h.Tenants)
	scale := activityScale(h.Tenants, skew, active)
	out := make([]genTenant, h.Tenants)
	for i := range out {
		r := float64(ranks[i] + 1)
		t := &out[i]
		t.name = fmt.Sprintf("tenant-%05d", i)
		t.active = math.Min(1, scale*math.Pow(r, -skew))
		t.load = math.Max(1, 20000*math.Pow(r, -skew))
		t.tier = tenant.Tier(1 + rng.IntN(3))
		t.service = genServices[rng.IntN(len(genServices))]
		t.writer = rng.IntN(max(h.Writers, 1))
		n := 2 + rng.IntN(5)
		for _, k := range rng.Perm(len(genRoutes))[:n] {
			t.routes = append(t.routes, genRoutes[k])
		}
	}
	return out, nil
}

// activityScale finds c such that the mean of min(1, c·r^−skew) over the
// ranks 1…n is active (bisection; the mean grows with c).
func activityScale(n int, skew, active float64) float64 {
	mean := func(c float64) float64 {
		var s float64
		for r := 1; r <= n; r++ {
			s += math.Min(1, c*math.Pow(float64(r), -skew))
		}
		return s / float64(n)
	}
	lo, hi := 0.0, 1.0
	for mean(hi) < active && hi < 1e300 {
		hi *= 2
	}
	for range 60 {
		mid := (lo + hi) / 2
		if mean(mid) < active {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// minute appends one active minute of t: one to three routes' requests
// with the database time under them, now and then a job and the pg
// sampler's sessions.
func (t *genTenant) minute(rows []store.Rollup, rng *rand.Rand, minute time.Time, writer string) []store.Rollup {
	base := store.Rollup{Minute: minute, Writer: writer, Version: 1, Tenant: t.name, Tier: t.tier}
	n := 1 + rng.IntN(min(3, len(t.routes)))
	start := rng.IntN(len(t.routes))
	for k := range n {
		count := 1 + uint64(t.load*rng.ExpFloat64()/float64(n))
		lat := 0.005 + 0.05*rng.ExpFloat64()
		r := base
		r.Service, r.Route, r.Kind = t.service, t.routes[(start+k)%len(t.routes)], store.KindRequest
		r.Count, r.Errors = count, uint64(float64(count)*0.02*rng.Float64())
		r.DurationSeconds, r.RU, r.Bytes = float64(count)*lat, float64(count)*(1+4*rng.Float64()), count*uint64(500+rng.IntN(4000))
		r.Latency = genLatency(rng, count, lat)
		db := r
		db.Kind, db.Count, db.Errors = store.KindDB, 2*count, 0
		db.DurationSeconds, db.RU, db.Bytes, db.Rows = r.DurationSeconds*0.6, float64(count)*2, 0, count*uint64(1+rng.IntN(50))
		db.Latency = genLatency(rng, 2*count, lat*0.3)
		rows = append(rows, r, db)
	}
	if rng.IntN(10) == 0 {
		count := 1 + uint64(rng.IntN(5))
		j := base
		j.Service, j.Route, j.Kind = "worker", genJobs[rng.IntN(len(genJobs))], store.KindJob
		j.Count, j.DurationSeconds, j.RU = count, float64(count)*(1+10*rng.Float64()), float64(count)*50
		j.Latency = genLatency(rng, count, j.DurationSeconds/float64(count))
		rows = append(rows, j)
	}
	if rng.IntN(4) == 0 {
		p := base
		p.Kind, p.ActiveSessionSeconds = store.KindPG, 60*rng.ExpFloat64()*math.Min(4, t.load/1000)+0.5
		p.DurationSeconds = p.ActiveSessionSeconds / 4 // what the statement rows count already
		rows = append(rows, p)
	}
	return rows
}

// genLatency spreads count observations around mean seconds over a few
// neighbouring buckets, as a real minute's histogram looks.
func genLatency(rng *rand.Rand, count uint64, mean float64) histogram.Sparse {
	var h histogram.Sparse
	c := histogram.BucketIndex(mean)
	left := count
	for k := 0; left > 0 && k < 5; k++ {
		n := left
		if k < 4 {
			n = left/2 + uint64(rng.IntN(int(min(left, 1<<30))/2+1))/2
		}
		if n == 0 {
			n = left
		}
		i := min(max(c+k-2, 0), histogram.NumBuckets-1)
		h.Add(i, n)
		left -= n
	}
	return h
}

// BenchHistory is the history the stores' read benchmarks fill: 200
// tenants over two whole days, small enough to write in seconds; the
// bench/storegen command writes the full-size ones.
var BenchHistory = History{Tenants: 200, From: T0.Truncate(24 * time.Hour), Minutes: 2 * 1440, Seed: 1}

// BenchReads runs the read benchmarks both stores share over a store
// holding BenchHistory: one tenant's last day (the busiest tenant and one
// of the tail), and the cost report's Usage over the two days, whole and
// from inside an hour to inside another.
func BenchReads(b *testing.B, s store.Store) {
	ctx := context.Background()
	h := BenchHistory
	to := h.From.Add(time.Duration(h.Minutes) * time.Minute)
	for _, name := range []string{"tenant-00011", "tenant-00150"} {
		b.Run("History/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := s.History(ctx, name, to.Add(-24*time.Hour), to); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, c := range []struct {
		name     string
		from, to time.Time
	}{{"Usage/whole-days", h.From, to}, {"Usage/inside-hours", h.From.Add(37 * time.Minute), to.Add(-23 * time.Minute)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := s.Usage(ctx, c.from, c.to, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FillBench writes BenchHistory to s.
func FillBench(b *testing.B, s store.Store) {
	b.Helper()
	if err := BenchHistory.Generate(20_000, func(rows []store.Rollup) error {
		return s.WriteRollups(context.Background(), rows)
	}); err != nil {
		b.Fatal(err)
	}
}
