package pilotpg

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/tenant"
)

// The database of testdata/pgbench: `pgbench -i -s 5`, 100,000 accounts a
// branch, and its statements.
const (
	scale      = 5
	victimRead = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	victimPost = "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = $1"
	noisyScan  = "SELECT sum(abalance), count(*) FROM pgbench_accounts WHERE bid = $1"
)

// The tenants: five small shops (the victims) on the pro plan, and the
// noisy merchant on the enterprise plan, whose own per-process limit is
// far above what it does (the plans are not what stops an incident here).
var (
	victims = []tenant.Tags{{Tenant: "acme", Tier: tenant.T1}, {Tenant: "globex", Tier: tenant.T1},
		{Tenant: "initech", Tier: tenant.T2}, {Tenant: "umbrella", Tier: tenant.T2}, {Tenant: "hooli", Tier: tenant.T2}}
	noisy = tenant.Tags{Tenant: "bigcorp", Tier: tenant.T3}
)

// The load: each victim a job every victimEvery; the noisy tenant one scan
// every noisyEvery at rest, and noiseWorkers scanning back to back (as
// `pgbench -c 8`) in the incident, each waiting refusedWait after a
// refusal, as a client honouring a 429 would.
const (
	victimEvery  = 50 * time.Millisecond
	noisyEvery   = time.Second
	noiseWorkers = 8
	refusedWait  = 100 * time.Millisecond
	processes    = 2
)

// pgbenchDB creates a database of its own, fills it with `pgbench -i -s
// 5`, and returns its DSN; it is dropped when t ends.
func pgbenchDB(t *testing.T) string {
	t.Helper()
	dsn := testsvc.Postgres(t)
	if _, err := exec.LookPath("pgbench"); err != nil {
		if testsvc.Required() {
			t.Fatal("pgbench is required (PostgreSQL's client tools)")
		}
		t.Skip("pgbench not installed")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var rb [4]byte
	crand.Read(rb[:])
	name := "qtop_pilot_" + hex.EncodeToString(rb[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := (&url.URL{Scheme: "postgres", User: url.UserPassword(cfg.User, cfg.Password),
		Host: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), Path: "/" + name, RawQuery: "sslmode=disable"}).String()
	if out, err := exec.Command("pgbench", "-i", "-s", strconv.Itoa(scale), "-q", u).CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	return u
}

// services are the processes of the service "shop": each an agent
// reporting to the collector, with its database handle.
type services struct {
	agents []*agent.Agent
	dbs    []*sql.DB
	n      atomic.Uint64 // jobs started, to alternate processes
}

func newServices(t *testing.T, collectorURL, dsn string) *services {
	t.Helper()
	plans := func(name string) string {
		if name == noisy.Tenant {
			return enforce.PlanEnterprise
		}
		return enforce.PlanPro
	}
	s := &services{}
	for i := range processes {
		a, err := agent.New(agent.WithCollector(collectorURL, ""), agent.WithService("shop"),
			agent.WithInstance("shop-"+strconv.Itoa(i)), agent.WithPlans(enforce.DefaultPlans(), plans))
		if err != nil {
			t.Fatal(err)
		}
		db, err := a.OpenDB("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
		s.agents, s.dbs = append(s.agents, a), append(s.dbs, db)
	}
	// Open the connections before the load: the first statements would
	// otherwise count a connection's setup in the victims' baseline.
	var wg sync.WaitGroup
	for _, db := range s.dbs {
		for range 12 {
			wg.Go(func() {
				if err := db.PingContext(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	return s
}

// shutdown sends the agents' last reports and closes the databases.
func (s *services) shutdown() {
	for i, a := range s.agents {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.Shutdown(ctx)
		cancel()
		s.dbs[i].Close()
	}
}

// job runs fn as one job of tags on the next process, with that
// process's database.
func (s *services) job(ctx context.Context, tags tenant.Tags, fn func(ctx context.Context, db *sql.DB) error) error {
	i := int(s.n.Add(1) % processes)
	return s.agents[i].Job(ctx, tags, func(ctx context.Context) error { return fn(ctx, s.dbs[i]) })
}

// throttled sums the noisy tier's refusals over the processes: applied,
// and counted in shadow.
func (s *services) throttled() (applied, shadow uint64) {
	for _, a := range s.agents {
		st := a.Enforcer().Stats().Tiers[noisy.Tier.Index()]
		applied += st.Throttled
		shadow += st.ShadowThrottled
	}
	return applied, shadow
}

// sample is one victim job as its client saw it.
type sample struct {
	at  time.Time // when it ended
	d   time.Duration
	err bool
}

// clientLatencies keeps every victim job's latency, as the clients saw
// them (admission and both statements).
type clientLatencies struct {
	mu sync.Mutex
	s  []sample
}

func (c *clientLatencies) add(at time.Time, d time.Duration, err error) {
	c.mu.Lock()
	c.s = append(c.s, sample{at: at, d: d, err: err != nil})
	c.mu.Unlock()
}

// p95 is the p95 of the jobs that ended in [from, to) (0: none).
func (c *clientLatencies) p95(from, to time.Time) time.Duration {
	c.mu.Lock()
	var ds []time.Duration
	for _, s := range c.s {
		if !s.at.Before(from) && s.at.Before(to) {
			ds = append(ds, s.d)
		}
	}
	c.mu.Unlock()
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)*95/100, len(ds)-1)]
}

// victim runs tags' jobs, one every victimEvery, until ctx ends: a point
// read and a write of one account (testdata/pgbench/victim.sql).
func (s *services) victim(ctx context.Context, tags tenant.Tags, lat *clientLatencies) {
	tick := time.NewTicker(victimEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		aid := rand.IntN(scale*100000) + 1
		start := time.Now()
		err := s.job(ctx, tags, func(ctx context.Context, db *sql.DB) error {
			var b int
			if err := db.QueryRowContext(ctx, victimRead, aid).Scan(&b); err != nil {
				return err
			}
			_, err := db.ExecContext(ctx, victimPost, aid)
			return err
		})
		if ctx.Err() == nil {
			lat.add(time.Now(), time.Since(start), err)
		}
	}
}

// noisyCounts are the noisy tenant's jobs as its clients saw them.
type noisyCounts struct {
	admitted, refused atomic.Int64
}

// scan runs one scan of a random branch as a job of the noisy tenant and
// counts it; it reports whether the job was refused.
func (s *services) scan(ctx context.Context, c *noisyCounts) (refused bool) {
	err := s.job(ctx, noisy, func(ctx context.Context, db *sql.DB) error {
		var sum, n int64
		return db.QueryRowContext(ctx, noisyScan, rand.IntN(scale)+1).Scan(&sum, &n)
	})
	switch {
	case errors.Is(err, enforce.ErrThrottled) || errors.Is(err, enforce.ErrShed):
		c.refused.Add(1)
		return true
	case ctx.Err() == nil:
		c.admitted.Add(1)
	}
	return false
}

// noisyAtRest scans once every noisyEvery until ctx ends: the tenant's
// baseline.
func (s *services) noisyAtRest(ctx context.Context, c *noisyCounts) {
	tick := time.NewTicker(noisyEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.scan(ctx, c)
		}
	}
}

// noise runs one worker of the incident: scans back to back until ctx
// ends, refusedWait after each refusal.
func (s *services) noise(ctx context.Context, c *noisyCounts) {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for ctx.Err() == nil {
		if !s.scan(ctx, c) {
			continue
		}
		wait.Reset(refusedWait)
		select {
		case <-ctx.Done():
		case <-wait.C:
		}
	}
}
