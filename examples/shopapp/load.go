package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// LoadConfig configures a Load.
type LoadConfig struct {
	// Target is the app's base URL.
	Target string
	// Tenants is the number of ordinary tenants (tenant-01 …), picked with
	// a Zipf(1.1) law: a few are busy, most are quiet.
	Tenants int
	// Workers send the ordinary tenants' requests (default 4).
	Workers int
	// Pace is each ordinary worker's pause between requests (default
	// 5 ms): ordinary tenants browse, they do not hammer.
	Pace time.Duration
	// Noisy is the tenant that hammers NoisyRoute; empty: none.
	Noisy string
	// NoisyRoute is "reports" (GET /reports) or "import" (POST
	// /catalog/import?n=500); default reports.
	NoisyRoute string
	// NoisyWorkers send the noisy tenant's requests back to back (default 8).
	NoisyWorkers int
	// Client sends the requests (default: a client with a 10 s timeout).
	Client *http.Client
}

// Load drives a Zipf mix of ordinary tenants and one noisy tenant against
// the app and counts the answers per tenant and status.
type Load struct {
	cfg     LoadConfig
	mu      sync.Mutex
	counts  map[string]map[int]*atomic.Uint64
	tenants []string
}

// Status codes a Load counts; any other status is counted as 0, and so is a
// request that got no answer.
var loadStatuses = []int{http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable, 0}

// NewLoad checks cfg and returns a load ready to Run.
func NewLoad(cfg LoadConfig) (*Load, error) {
	if cfg.Target == "" {
		return nil, fmt.Errorf("%w: --target is required", ErrConfig)
	}
	if cfg.Tenants < 1 || cfg.Tenants > 10_000 {
		return nil, fmt.Errorf("%w: --tenants %d: want 1 to 10000", ErrConfig, cfg.Tenants)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	if cfg.Pace == 0 {
		cfg.Pace = 5 * time.Millisecond
	}
	if cfg.NoisyWorkers == 0 {
		cfg.NoisyWorkers = 8
	}
	if cfg.Workers < 0 || cfg.NoisyWorkers < 0 || cfg.Pace < 0 {
		return nil, fmt.Errorf("%w: negative worker count or pace", ErrConfig)
	}
	switch cfg.NoisyRoute {
	case "":
		cfg.NoisyRoute = "reports"
	case "reports", "import":
	default:
		return nil, fmt.Errorf("%w: --noisy-route %q: want reports or import", ErrConfig, cfg.NoisyRoute)
	}
	if cfg.Noisy != "" {
		if err := tenant.ValidateTenant(cfg.Noisy); err != nil {
			return nil, fmt.Errorf("%w: --noisy: %v", ErrConfig, err)
		}
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	cfg.Target = strings.TrimRight(cfg.Target, "/")
	l := &Load{cfg: cfg, counts: map[string]map[int]*atomic.Uint64{}}
	for i := range cfg.Tenants {
		l.tenants = append(l.tenants, fmt.Sprintf("tenant-%02d", i+1))
	}
	for _, t := range append(slices.Clone(l.tenants), cfg.Noisy) {
		if t == "" {
			continue
		}
		m := map[int]*atomic.Uint64{}
		for _, s := range loadStatuses {
			m[s] = new(atomic.Uint64)
		}
		l.counts[t] = m
	}
	return l, nil
}

// Tenants returns the ordinary tenants' names, busiest first.
func (l *Load) Tenants() []string { return slices.Clone(l.tenants) }

// Run sends requests until ctx is done. Ordinary tenants (tier T1) read
// products, now and then run a report or a small import; the noisy tenant
// (tier T2) runs its route back to back.
func (l *Load) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := range l.cfg.Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 0x5eed))
			zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(l.tenants)-1))
			for ctx.Err() == nil {
				t := l.tenants[zipf.Uint64()]
				method, path := http.MethodGet, "/products"
				switch p := rng.IntN(100); {
				case p < 5:
					path = "/reports"
				case p < 10:
					method, path = http.MethodPost, "/catalog/import?n=20"
				}
				l.send(ctx, t, "T1", method, path)
				pause(ctx, l.cfg.Pace)
			}
		})
	}
	if l.cfg.Noisy != "" {
		method, path := http.MethodGet, "/reports"
		if l.cfg.NoisyRoute == "import" {
			method, path = http.MethodPost, "/catalog/import?n=500"
		}
		for range l.cfg.NoisyWorkers {
			wg.Go(func() {
				for ctx.Err() == nil {
					l.send(ctx, l.cfg.Noisy, "T2", method, path)
				}
			})
		}
	}
	wg.Wait()
}

func (l *Load) send(ctx context.Context, tenantName, tier, method, path string) {
	req, err := http.NewRequestWithContext(ctx, method, l.cfg.Target+path, nil)
	if err != nil {
		return
	}
	req.Header.Set(HeaderTenant, tenantName)
	req.Header.Set(HeaderTier, tier)
	resp, err := l.cfg.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: not an answer
		}
		l.count(tenantName, 0)
		pause(ctx, 100*time.Millisecond) // the app is down: do not spin
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l.count(tenantName, resp.StatusCode)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		// A polite client waits a little when refused (a real one honours
		// Retry-After); keep hammering but not in a hot loop.
		pause(ctx, 20*time.Millisecond)
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (l *Load) count(t string, status int) {
	m := l.counts[t]
	c, ok := m[status]
	if !ok {
		c = m[0]
	}
	c.Add(1)
}

// Count returns how many answers of status tenant t got so far (status 0:
// other statuses and failed requests).
func (l *Load) Count(t string, status int) uint64 {
	m, ok := l.counts[t]
	if !ok {
		return 0
	}
	c, ok := m[status]
	if !ok {
		return 0
	}
	return c.Load()
}

// WriteSummary prints the answers per tenant that got any, noisy first,
// then by requests sent.
func (l *Load) WriteSummary(w io.Writer) error {
	type line struct {
		t     string
		c     [4]uint64
		total uint64
	}
	var lines []line
	for t := range l.counts {
		var ln line
		ln.t = t
		for i, s := range loadStatuses {
			ln.c[i] = l.Count(t, s)
			ln.total += ln.c[i]
		}
		if ln.total > 0 {
			lines = append(lines, ln)
		}
	}
	slices.SortFunc(lines, func(a, b line) int {
		switch {
		case a.t == l.cfg.Noisy:
			return -1
		case b.t == l.cfg.Noisy:
			return 1
		case a.total != b.total:
			if a.total > b.total {
				return -1
			}
			return 1
		}
		return strings.Compare(a.t, b.t)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TENANT\t200\t429\t503\tOTHER\t")
	for _, ln := range lines {
		name := ln.t
		if name == l.cfg.Noisy {
			name += " (noisy)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", name, ln.c[0], ln.c[1], ln.c[2], ln.c[3])
	}
	return errors.Join(tw.Flush())
}
