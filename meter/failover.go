package meter

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qtop-dev/qtop/report"
)

// MaxCollectors bounds the collectors one Reporter chooses from.
const MaxCollectors = 64

// DefaultFailback is how long a Reporter that failed over stays on the
// collector it moved to before trying its first choice again.
const DefaultFailback = time.Minute

// WithCollectors gives the Reporter more collectors besides the URL passed
// to NewReporter (the report endpoint of each, e.g.
// "http://collector-2:7070/v1/reports"; MaxCollectors in all). A process
// ranks them by its source identity (rendezvous hashing, so a fleet spreads
// evenly over the collectors and each process always starts on the same
// one) and sends to the first. When an attempt fails — network error,
// timeout, 5xx — the retry goes to the next collector of its order; after
// WithFailback it goes back to its first choice. A retried report keeps
// its Seq, so a collector that already has it (merged, or seen from the
// collector that logged it) counts it once.
func WithCollectors(urls ...string) ReporterOption {
	return reporterOption(func(c *config) { c.failover.collectors = append(c.failover.collectors, urls...) })
}

// WithFailback sets how long the Reporter stays on the collector it failed
// over to before trying its first choice again (default DefaultFailback),
// by the clock of WithClock.
func WithFailback(d time.Duration) ReporterOption {
	return reporterOption(func(c *config) { c.failover.failback = d })
}

// targets is the Reporter's ranked list of collectors and the one in use.
// Only the sender (one at a time) moves it; reads take the Reporter's mu.
type targets struct {
	urls     []string // ranked for this source, first choice first
	cur      int
	movedAt  time.Time
	failback time.Duration
}

// newTargets checks every URL and ranks them for the source src.
func newTargets(primary string, others []string, src report.Source, failback time.Duration) (targets, error) {
	all := append([]string{primary}, others...)
	if len(all) > MaxCollectors {
		return targets{}, fmt.Errorf("%w: %d collectors (at most %d)", ErrInvalid, len(all), MaxCollectors)
	}
	if failback < 0 {
		return targets{}, fmt.Errorf("%w: failback %v", ErrInvalid, failback)
	}
	if failback == 0 {
		failback = DefaultFailback
	}
	seen := make(map[string]bool, len(all))
	var urls []string
	for _, raw := range all {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return targets{}, fmt.Errorf("%w: collector URL %q (want http(s)://host/v1/reports)", ErrInvalid, raw)
		}
		if !seen[raw] {
			seen[raw] = true
			urls = append(urls, raw)
		}
	}
	id := src.Service + "\x00" + src.Instance + "\x00" + src.Host
	score := func(u string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(u))
		return mix64(h.Sum64())
	}
	slices.SortStableFunc(urls, func(a, b string) int {
		sa, sb := score(a), score(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
	return targets{urls: urls, failback: failback}, nil
}

// mix64 is the murmur3 finaliser: FNV's high bits alone rank poorly.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// pick returns the collector for the next attempt at now: the current one,
// or the first choice again once failback has passed since a failover.
func (t *targets) pick(now time.Time) string {
	if t.cur != 0 && now.Sub(t.movedAt) >= t.failback {
		t.cur = 0
	}
	return t.urls[t.cur]
}

// fail moves to the next collector after a failed attempt to u; it
// reports whether it moved (it does not with one collector, or when
// another attempt moved already).
func (t *targets) fail(u string, now time.Time) bool {
	if len(t.urls) < 2 || t.urls[t.cur] != u {
		return false
	}
	t.cur = (t.cur + 1) % len(t.urls)
	t.movedAt = now
	return true
}

// Collector returns the report URL the Reporter sends its next attempt to.
func (r *Reporter) Collector() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.targets.pick(r.cfg.clock())
}

// Collectors returns every collector the Reporter may send to, in its
// order of choice.
func (r *Reporter) Collectors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.targets.urls)
}

func (r *Reporter) target() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.targets.pick(r.cfg.clock())
}

// failover moves the next attempt off u after a failed attempt to it.
func (r *Reporter) failover(u string) {
	r.mu.Lock()
	moved := r.targets.fail(u, r.cfg.clock())
	r.mu.Unlock()
	if moved && r.m != nil {
		r.m.failovers.Inc()
	}
}

func newFailoverCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_ingest_report_failovers_total",
		Help: "Times the reporter moved to its next collector after a failed attempt."})
}
