// Command pgbouncer runs tenant-tagged load through a PgBouncer in
// transaction pooling mode and checks, by sampling pg_stat_activity on
// the PostgreSQL server itself (directly and with the pgactivity
// sampler), that no statement is ever shown under another tenant's
// application_name or comment. See README.md in this folder.
//
//	eval "$(./scripts/services env)"
//	DSN=$(bench/pgbouncer/pgbouncer.sh start 16432 2)
//	cd bench && go run ./pgbouncer -bouncer "$DSN" -direct "$QTOP_TEST_POSTGRES" -driver pgx -mode session
//
// Every statement of the load names its true tenant in a string literal
// ('truth:acme', 'truth:-' for untagged work), which pg_stat_activity
// shows; the checker compares it with the tenant read back from
// application_name and the comment, and the service with -service.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/comment"
)

type options struct {
	bouncer, direct string
	driver, mode    string
	execMode        string
	service         string
	startupName     string
	workers         int
	tenants         int
	poolConns       int
	duration        time.Duration
	sleep           float64
	cancel          bool
}

func main() {
	var o options
	flag.StringVar(&o.bouncer, "bouncer", "", "DSN of the PgBouncer (the load goes through it)")
	flag.StringVar(&o.direct, "direct", os.Getenv("QTOP_TEST_POSTGRES"), "DSN of the PostgreSQL server (sampled directly)")
	flag.StringVar(&o.driver, "driver", "pgx", "pgx (pgxpool) or stdlib (database/sql over pgx's stdlib)")
	flag.StringVar(&o.mode, "mode", "session", "tagging mode: comment, session, both or auto")
	flag.StringVar(&o.execMode, "exec", "cache_statement", "pgx default query exec mode: cache_statement, cache_describe, describe_exec, exec, simple_protocol")
	flag.StringVar(&o.service, "service", "billing", "service name (sqlcomment.WithApplication)")
	flag.StringVar(&o.startupName, "startup-name", "billing", "application_name in the startup packet (\"\" for none)")
	flag.IntVar(&o.workers, "workers", 32, "goroutines sending load")
	flag.IntVar(&o.tenants, "tenants", 8, "tenants (each transaction picks one)")
	flag.IntVar(&o.poolConns, "conns", 16, "client connections to the bouncer (pool size)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long the load runs")
	flag.Float64Var(&o.sleep, "sleep", 0.002, "pg_sleep seconds per statement (so the sampler sees it)")
	flag.BoolVar(&o.cancel, "cancel", false, "instead of the load, check that a context cancel through the bouncer cancels the right statement")
	flag.Parse()
	if o.bouncer == "" || o.direct == "" {
		fmt.Fprintln(os.Stderr, "pgbouncer: -bouncer and -direct are required")
		os.Exit(2)
	}
	var err error
	if o.cancel {
		err = runCancel(context.Background(), o)
	} else {
		err = run(context.Background(), o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgbouncer:", err)
		os.Exit(1)
	}
}

func execMode(s string) (pgx.QueryExecMode, error) {
	for _, m := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		if strings.ReplaceAll(m.String(), " ", "_") == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown exec mode %q", s)
}

func bouncerConfig(o options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(o.bouncer)
	if err != nil {
		return nil, err
	}
	m, err := execMode(o.execMode)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.DefaultQueryExecMode = m
	if o.startupName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.startupName
	}
	cfg.MaxConns = int32(o.poolConns)
	return cfg, nil
}

func run(ctx context.Context, o options) error {
	mode, err := sqlcomment.ParseMode(o.mode)
	if err != nil {
		return err
	}
	cfg, err := bouncerConfig(o)
	if err != nil {
		return err
	}
	ld, closeLoad, err := newLoader(ctx, o, cfg, mode)
	if err != nil {
		return err
	}
	defer closeLoad()
	dcfg, err := pgxpool.ParseConfig(o.direct)
	if err != nil {
		return err
	}
	dcfg.ConnConfig.RuntimeParams["application_name"] = checkerName
	direct, err := pgxpool.NewWithConfig(ctx, dcfg)
	if err != nil {
		return err
	}
	defer direct.Close()

	loadCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	var res results
	var wg sync.WaitGroup
	for w := range o.workers {
		wg.Go(func() { ld.work(loadCtx, w, &res) })
	}
	var ck checker
	ck.service = o.service
	wg.Go(func() { ck.sampleRaw(loadCtx, direct) })
	wg.Go(func() { ck.sampleSampler(loadCtx, direct) })
	wg.Wait()

	fmt.Printf("driver=%s mode=%s exec=%s workers=%d conns=%d tenants=%d duration=%s startup-name=%q\n",
		o.driver, o.mode, o.execMode, o.workers, o.poolConns, o.tenants, o.duration, o.startupName)
	res.print()
	ck.print()
	return after(ctx, o, direct)
}

// after reports, once the load has stopped, what application_name each
// server connection is left with, and what a new client that sets none
// sees through the bouncer.
func after(ctx context.Context, o options, direct *pgxpool.Pool) error {
	rows, err := direct.Query(ctx, `SELECT coalesce(application_name, ''), state, count(*) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND client_port IS NOT NULL
		GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return err
	}
	fmt.Println("server connections after the load (application_name, state, count):")
	for rows.Next() {
		var name, state string
		var n int
		if err := rows.Scan(&name, &state, &n); err != nil {
			return err
		}
		fmt.Printf("  %-40q %-20s %d\n", name, state, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	cfg, err := pgx.ParseConfig(o.bouncer)
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	for _, own := range []string{"", "other-service"} {
		if own == "" {
			delete(cfg.RuntimeParams, "application_name")
		} else {
			cfg.RuntimeParams["application_name"] = own
		}
		seen := map[string]int{}
		for range 20 {
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				return err
			}
			var name string
			err = c.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name)
			c.Close(ctx)
			if err != nil {
				return err
			}
			seen[name]++
		}
		fmt.Printf("20 new clients with application_name=%q run under: %v\n", own, seen)
	}
	return nil
}

// results counts the load's operations and errors.
type results struct {
	ops    atomic.Int64
	mu     sync.Mutex
	errors map[string]int
	wrong  map[string]int // current_setting('application_name') seen by the statement itself ≠ expected
}

func (r *results) fail(kind string, err error) {
	msg := err.Error()
	if len(msg) > 120 {
		msg = msg[:120]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errors == nil {
		r.errors = map[string]int{}
	}
	r.errors[kind+": "+msg]++
}

func (r *results) mismatch(kind, want, got string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wrong == nil {
		r.wrong = map[string]int{}
	}
	r.wrong[fmt.Sprintf("%s: want %q got %q", kind, want, got)]++
}

func (r *results) print() {
	fmt.Printf("operations: %d\n", r.ops.Load())
	printCounts("unexpected errors", r.errors)
	printCounts("statements that saw the wrong application_name (current_setting)", r.wrong)
}

func printCounts(title string, m map[string]int) {
	n := 0
	for _, v := range m {
		n += v
	}
	fmt.Printf("%s: %d\n", title, n)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	for i, k := range keys {
		if i == 12 {
			fmt.Printf("  … %d more kinds\n", len(keys)-i)
			break
		}
		fmt.Printf("  %6d  %s\n", m[k], k)
	}
}

// checker samples pg_stat_activity on the server.
type checker struct {
	service string
	mu      sync.Mutex
	raw     counts
	sampled counts
}

type counts struct {
	samples, rows, right int
	aborted              int // sessions idle in an aborted transaction, not judged
	bad                  map[string]int
}

func (c *counts) add(ok bool, what string) {
	c.rows++
	if ok {
		c.right++
		return
	}
	if c.bad == nil {
		c.bad = map[string]int{}
	}
	c.bad[what]++
}

// checkerName is the application_name of the checker's own sessions.
const checkerName = "pgbouncer-checker"

// truth returns the tenant a statement's literal names ("-": untagged).
func truth(q string) (string, bool) {
	i := strings.Index(q, "'truth:")
	if i < 0 || strings.Contains(q, checkerName) {
		return "", false
	}
	q = q[i+len("'truth:"):]
	j := strings.IndexByte(q, '\'')
	if j < 0 {
		return "", false
	}
	return q[:j], true
}

// judge compares what a sample says of a statement with its truth.
func (ck *checker) judge(truthTenant, tenant, service, origin string) (bool, string) {
	want := truthTenant
	if want == "-" {
		want = ""
	}
	switch {
	case tenant != want && tenant != "" && want != "":
		return false, "another tenant's " + origin
	case tenant != want && want == "":
		return false, "untagged statement shown with a tenant (" + origin + ")"
	case tenant != want:
		return false, "tagged statement shown without its tenant"
	case service != ck.service:
		return false, fmt.Sprintf("service %q, not %q (%s)", service, ck.service, origin)
	}
	return true, ""
}

func (ck *checker) sampleRaw(ctx context.Context, direct *pgxpool.Pool) {
	for ctx.Err() == nil {
		rows, err := direct.Query(ctx, `SELECT coalesce(application_name, ''), state, query FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND state <> 'idle' AND query LIKE '%' || chr(39) || 'truth:%'`)
		if err != nil {
			continue
		}
		var seen []([3]string)
		for rows.Next() {
			var r [3]string
			if rows.Scan(&r[0], &r[1], &r[2]) == nil {
				seen = append(seen, r)
			}
		}
		rows.Close()
		ck.mu.Lock()
		ck.raw.samples++
		for _, r := range seen {
			tt, ok := truth(r[2])
			if !ok || r[0] == checkerName {
				continue
			}
			tenant, service, origin := "", r[0], "application_name"
			if a, ok := comment.ParseApplicationName(r[0]); ok {
				tenant, service = a.Tenant, a.Service
			}
			if tags, _ := comment.Parse(r[2]); tags[comment.KeyTenant] != "" {
				tenant, origin = tags[comment.KeyTenant], "comment"
				if service == r[0] && tags[comment.KeyApplication] != "" && !strings.Contains(r[0], "|t=") {
					service = tags[comment.KeyApplication]
				}
			}
			if r[1] == "idle in transaction (aborted)" {
				// PostgreSQL undoes SET LOCAL when the error happens, not at
				// ROLLBACK: such a session holds nothing and is not load.
				ck.raw.aborted++
				continue
			}
			ok, what := ck.judge(tt, tenant, service, origin)
			if !ok {
				what += fmt.Sprintf(" [state %s] e.g. application_name=%q query=%.60q", r[1], r[0], r[2])
			}
			ck.raw.add(ok, what)
		}
		ck.mu.Unlock()
	}
}

func (ck *checker) sampleSampler(ctx context.Context, direct *pgxpool.Pool) {
	s := pgactivity.NewSampler(direct)
	for ctx.Err() == nil {
		snap, err := s.Sample(ctx)
		if err != nil {
			continue
		}
		ck.mu.Lock()
		ck.sampled.samples++
		for _, b := range snap.Backends {
			tt, ok := truth(b.Query)
			if !ok || b.Application == checkerName {
				continue
			}
			if b.State == "idle in transaction (aborted)" {
				ck.sampled.aborted++
				continue
			}
			ok, what := ck.judge(tt, b.Tenant, b.Application, "sampler")
			if !ok {
				what += fmt.Sprintf(" [state %s] tenant=%q application=%q", b.State, b.Tenant, b.Application)
			}
			ck.sampled.add(ok, what)
		}
		ck.mu.Unlock()
	}
}

func (ck *checker) print() {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for _, x := range []struct {
		name string
		c    *counts
	}{{"pg_stat_activity (raw)", &ck.raw}, {"pgactivity sampler", &ck.sampled}} {
		fmt.Printf("%s: %d samples, %d statements seen, %d attributed right (and %d idle in an aborted transaction, not judged)\n",
			x.name, x.c.samples, x.c.rows, x.c.right, x.c.aborted)
		printCounts("  wrong", x.c.bad)
	}
}
