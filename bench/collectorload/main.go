// Command collectorload drives a running collector over real HTTP on
// loopback: a load run of reporting processes (reports of 100 tenant rows
// each, every process its own source, the tenants drawn from -tenants
// distinct names, uniformly or with -zipf S from a Zipf(S) mix) and the
// hostile cases of the collector's hardening, each with its status, reason
// and the collector's resident memory before and after; and a fleet of
// OTLP/gRPC exporters, a connection each (otlp-grpc-fleet); streams that
// send their headers and nothing else beside one exporter (otlp-grpc-idle).
//
//	collector serve --listen 127.0.0.1:7171 --store none --data-dir /tmp/qtop-load &
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! load -reporters 1000 -interval 200ms -duration 10s
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! load -raw -tenants 100000 -reporters 600 -interval 100ms -duration 10s
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! load -raw -tenants 100000 -zipf 1.1 -reporters 600 -interval 100ms -duration 10s
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! load -raw -reporters 600 -interval 100ms -duration 10s
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! load -raw -view -reporters 200 -interval 1s -duration 10s
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! hostile
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! -token T otlp-grpc-hostile -grpc 127.0.0.1:14317 -as wrong -gzip
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! -token T otlp-http-hostile -case slow
//	go run ./collectorload -addr 127.0.0.1:7171 -pid $! otlp-grpc-fleet -grpc 127.0.0.1:14317 -exporters 2000 -interval 30s -duration 40s
//	go run ./collectorload -addr 127.0.0.1:7171 otlp-grpc-idle -grpc 127.0.0.1:14317 -conns 2 -streams 4 -duration 10s
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	wire "github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7171", "the collector")
	pid := flag.Int("pid", 0, "the collector's process id, to read its resident memory")
	token := flag.String("token", "", "report token")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: collectorload [-addr A] [-pid P] [-token T] load [flags] | hostile [flags] | otlp-grpc-hostile [flags] | otlp-http-hostile [flags] | otlp-grpc-fleet [flags] | otlp-grpc-idle [flags]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	e := &env{base: "http://" + *addr, pid: *pid, token: *token, client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext},
		Timeout: 30 * time.Second,
	}}
	switch flag.Arg(0) {
	case "load":
		os.Exit(e.load(flag.Args()[1:]))
	case "hostile":
		os.Exit(e.hostile(flag.Args()[1:]))
	case "otlp-grpc-hostile":
		os.Exit(e.otlpGRPCHostile(flag.Args()[1:]))
	case "otlp-http-hostile":
		os.Exit(e.otlpHTTPHostile(flag.Args()[1:]))
	case "otlp-grpc-fleet":
		os.Exit(e.otlpGRPCFleet(flag.Args()[1:]))
	case "otlp-grpc-idle":
		os.Exit(e.otlpGRPCIdle(flag.Args()[1:]))
	}
	flag.Usage()
	os.Exit(2)
}

// askView is the load mode's -view flag, read by report.
var askView bool

// mix is the load mode's tenant population (-tenants, -zipf), read by
// report.
var mix = tenantMix{n: 2000}

// tenantMix draws tenant names from n distinct ones: uniformly, or, when
// zipf > 1, tenant-000000 the most often, with Zipf(zipf) weights.
type tenantMix struct {
	n    int
	zipf float64
}

// picker returns a function drawing one tenant name with rng.
func (m tenantMix) picker(rng *rand.Rand) func() string {
	if m.zipf > 1 {
		z := rand.NewZipf(rng, m.zipf, 1, uint64(m.n-1))
		return func() string { return fmt.Sprintf("tenant-%06d", z.Uint64()) }
	}
	return func() string { return fmt.Sprintf("tenant-%06d", rng.IntN(m.n)) }
}

type env struct {
	base   string
	pid    int
	token  string
	client *http.Client
	// prepared, when set, is called once a fleet's bodies are encoded,
	// just before it starts sending (an attack beside it starts then).
	prepared func()
}

// rssMB is the collector's resident memory.
func (e *env) rssMB() float64 {
	if e.pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

// cpuSeconds is the collector's user+system CPU time.
func (e *env) cpuSeconds() float64 {
	if e.pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", e.pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var u, sy float64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &sy)
	return (u + sy) / 100
}

// report encodes one report of rows tenant rows of source inst at seq,
// of the window [start, end).
func report(rng *rand.Rand, service, inst string, seq uint64, rows int, start, end time.Time) []byte {
	rep := &wire.Report{Source: wire.Source{Service: service, Instance: inst, Host: "loadhost"}, Seq: seq,
		Start: start, End: end, Rows: make([]wire.Row, rows)}
	pick := mix.picker(rng)
	for j := range rows {
		r := &rep.Rows[j]
		r.Tenant, r.Route, r.Tier, r.Kind = pick(), "GET /items", tenant.T2, wire.KindRequest
		r.Count, r.RU, r.Bytes, r.Duration = 10, 12.5, 4096, 100*time.Millisecond
		for range 10 {
			r.Latency.Observe(0.005 * (1 + rng.ExpFloat64()))
		}
	}
	// Distinct tenants per report.
	seen := map[string]bool{}
	out := rep.Rows[:0]
	for _, r := range rep.Rows {
		if !seen[r.Tenant] {
			seen[r.Tenant] = true
			out = append(out, r)
		}
	}
	rep.Rows = out
	if askView {
		rep.SetSection(wire.PolicyView{}) // a process that holds no view yet: the largest view reply
	}
	b, err := rep.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return b
}

func (e *env) post(ctx context.Context, path, ct string, body []byte, hdr ...string) (int, string, time.Duration) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	t0 := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err.Error(), time.Since(t0)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	d := time.Since(t0)
	msg := ""
	if resp.StatusCode != 200 {
		if r, err := wire.DecodeReply(b); err == nil {
			msg = r.Message
		} else {
			msg = strings.TrimSpace(string(b))
		}
	}
	return resp.StatusCode, msg, d
}

type result struct {
	elapsed                   time.Duration
	cpu                       float64 // the collector's CPU seconds during the run
	sent, ok, refused, failed atomic.Int64
	mu                        sync.Mutex
	lat                       []time.Duration
	why                       map[string]int
}

func (r *result) add(status int, d time.Duration, msg string) {
	if status != 200 {
		r.mu.Lock()
		if r.why == nil {
			r.why = map[string]int{}
		}
		r.why[fmt.Sprintf("%d %s", status, short(msg))]++
		r.mu.Unlock()
	}
	r.sent.Add(1)
	switch {
	case status == 200:
		r.ok.Add(1)
	case status == 0:
		r.failed.Add(1)
	default:
		r.refused.Add(1)
	}
	r.mu.Lock()
	r.lat = append(r.lat, d)
	r.mu.Unlock()
}

func (r *result) quantile(q float64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return r.lat[min(len(r.lat)-1, int(q*float64(len(r.lat))))]
}

// fleet runs reporters processes, each sending one report every interval
// (open loop, phases spread) for d; bodies are encoded before the run.
func (e *env) fleet(ctx context.Context, service string, reporters, rows int, interval, d time.Duration) *result {
	return e.fleetWith(ctx, service, reporters, rows, interval, d, false)
}

// schedule is when each process of a run sends its reports: process i
// sends its k-th (from 0) at start + phase[i] + k·interval, and that
// report's window is the interval it ends.
type schedule struct {
	start    time.Time
	interval time.Duration
	phase    []time.Duration
}

// newSchedule plans reporters processes, one report each per interval,
// their phases spread at random over the interval, from start.
func newSchedule(start time.Time, interval time.Duration, reporters int) schedule {
	s := schedule{start: start, interval: interval, phase: make([]time.Duration, reporters)}
	for i := range s.phase {
		s.phase[i] = time.Duration(rand.Int64N(int64(interval)))
	}
	return s
}

// sendAt is when process i sends its k-th report: the end of its window.
func (s schedule) sendAt(i, k int) time.Time {
	return s.start.Add(s.phase[i] + time.Duration(k)*s.interval)
}

// encodeFleet encodes per reports for each process of s, each stamped
// with the window that ends when it is sent, so that a long run's load
// lands in the minutes it is sent in.
func encodeFleet(service string, s schedule, rows, per int) [][][]byte {
	bodies := make([][][]byte, len(s.phase))
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			inst := fmt.Sprintf("%s-%d-%d", service, i, time.Now().UnixNano())
			for k := range per {
				end := s.sendAt(i, k)
				bodies[i] = append(bodies[i], report(rng, service, inst, uint64(k+1), rows, end.Add(-s.interval), end))
			}
		}()
	}
	wg.Wait()
	return bodies
}

// encodeLead estimates how long encoding per reports of rows rows for
// reporters processes takes, from the quickest of a few reports timed
// here, with a margin: the run is planned to start after it. (One report
// timed alone, descheduled or caught by a collection on a busy machine,
// once planned a 10 s run 45 minutes ahead.)
func encodeLead(reporters, rows, per int) time.Duration {
	rng := rand.New(rand.NewPCG(0, 7))
	one := time.Duration(math.MaxInt64)
	for range 5 {
		t0 := time.Now()
		report(rng, "lead", "lead", 1, rows, t0.Add(-time.Second), t0)
		one = min(one, time.Since(t0))
	}
	n := time.Duration(reporters * per / max(runtime.GOMAXPROCS(0), 1))
	return n*one*3/2 + time.Second
}

// fleetWith is fleet; with raw, each process posts over a rawConn.
func (e *env) fleetWith(ctx context.Context, service string, reporters, rows int, interval, d time.Duration, raw bool) *result {
	per := int(d/interval) + 1
	// Encoding takes about as long as the run on two cores: say when the
	// run starts, for a profile or a watch of the collector to begin then.
	// Each report is stamped with the window it is sent at the end of, so
	// the run is planned before encoding, to start once it is done.
	plan := newSchedule(time.Now().Add(encodeLead(reporters, rows, per)), interval, reporters)
	fmt.Fprintf(os.Stderr, "collectorload: encoding %d reports of %d rows before the run (planned at %s)…\n", reporters*per, rows, plan.start.Format(time.TimeOnly))
	bodies := encodeFleet(service, plan, rows, per)
	// With raw, the requests are made whole here too: made in the run, by
	// every process at once, their copying took the cores for its first
	// half second and was counted as the collector's latency.
	var conns []*rawConn
	var reqs [][][]byte
	if raw {
		conns, reqs = make([]*rawConn, reporters), make([][][]byte, reporters)
		for i := range reporters {
			conns[i] = &rawConn{addr: strings.TrimPrefix(e.base, "http://"), token: e.token}
			for _, b := range bodies[i] {
				reqs[i] = append(reqs[i], conns[i].request("/v1/reports", wire.ContentType, b))
			}
			bodies[i] = nil
		}
	}
	var wg sync.WaitGroup
	if e.prepared != nil {
		e.prepared()
	}
	if late := time.Since(plan.start); late > 0 {
		// Started as planned, the first reports would all go at once.
		fmt.Fprintf(os.Stderr, "collectorload: encoding overran the plan by %v: each report is sent that much after its window\n", late.Round(time.Millisecond))
		plan.start = time.Now()
	} else {
		time.Sleep(-late)
	}
	fmt.Fprintf(os.Stderr, "collectorload: %s: the run starts, %s\n", time.Now().Format(time.TimeOnly), d)
	res := &result{}
	cpu0 := e.cpuSeconds()
	start := plan.start
	for i := range reporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := plan.sendAt(i, 0)
			var rc *rawConn
			n := len(bodies[i])
			if raw {
				rc, n = conns[i], len(reqs[i])
				defer func() {
					if rc.c != nil {
						rc.c.Close()
					}
				}()
			}
			for k := 0; ; k++ {
				if dl := next.Sub(time.Now()); dl > 0 {
					select {
					case <-time.After(dl):
					case <-ctx.Done():
						return
					}
				}
				if time.Since(start) >= d || k >= n {
					return
				}
				var status int
				var msg string
				var lat time.Duration
				if raw {
					t0 := time.Now()
					var b []byte
					var err error
					status, b, err = rc.do(reqs[i][k])
					lat = time.Since(t0)
					if err != nil {
						msg = err.Error()
					} else if status != 200 {
						if r, err := wire.DecodeReply(b); err == nil {
							msg = r.Message
						}
					}
				} else {
					status, msg, lat = e.post(ctx, "/v1/reports", wire.ContentType, bodies[i][k])
				}
				res.add(status, lat, msg)
				next = plan.sendAt(i, k+1)
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.cpu = e.cpuSeconds() - cpu0
	return res
}

func (e *env) load(args []string) int {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	reporters := fs.Int("reporters", 1000, "reporting processes")
	rows := fs.Int("rows", 100, "tenant rows per report")
	interval := fs.Duration("interval", 200*time.Millisecond, "each process sends one report per interval")
	d := fs.Duration("duration", 10*time.Second, "length of the run")
	fs.BoolVar(&askView, "view", false, "reports carry the policy-view section (report.PolicyView with no tag held): replies carry each process's view instead of the whole policy")
	fs.IntVar(&mix.n, "tenants", 2000, "distinct tenants the reports' rows are drawn from")
	fs.Float64Var(&mix.zipf, "zipf", 0, "draw tenants from a Zipf(S) mix (S > 1: tenant-000000 the most often) instead of uniformly")
	raw := fs.Bool("raw", false, "post with a minimal HTTP/1.1 client (keep-alive, requests built before the run) instead of net/http's, so the generator takes less CPU from a collector on the same cores")
	fs.Parse(args)
	if mix.n < 1 || (mix.zipf != 0 && mix.zipf <= 1) {
		fmt.Fprintln(os.Stderr, "collectorload: load: want -tenants ≥ 1 and -zipf 0 (uniform) or > 1")
		return 2
	}
	ctx := context.Background()
	rss0 := e.rssMB()
	res := e.fleetWith(ctx, "load", *reporters, *rows, *interval, *d, *raw)
	el, cpu := res.elapsed.Seconds(), res.cpu
	fmt.Printf("load: %d reporters × 1 report/%v, %d rows each, %.1f s, %d tenants (%s)\n", *reporters, *interval, *rows, el, mix.n, mix)
	fmt.Printf("  sent %d, accepted %d (%.0f/s), refused %d (%.2f%%), failed %d\n", res.sent.Load(), res.ok.Load(),
		float64(res.ok.Load())/el, res.refused.Load(), 100*float64(res.refused.Load())/float64(max(1, res.sent.Load())), res.failed.Load())
	fmt.Printf("  latency p50 %v p99 %v max %v\n", res.quantile(0.5).Round(time.Microsecond*100), res.quantile(0.99).Round(time.Microsecond*100), res.quantile(1).Round(time.Millisecond))
	for w, n := range res.why {
		fmt.Printf("  refused %d× %s\n", n, w)
	}
	fmt.Printf("  collector CPU %.2f s (%.0f%% of one core, %.0f µs per accepted report), RSS %.0f → %.0f MB\n", cpu, 100*cpu/el,
		1e6*cpu/float64(max(1, res.ok.Load())), rss0, e.rssMB())
	return 0
}

func (e *env) get(path string, hdr ...string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, e.base+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

func short(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func (e *env) line(name string, status int, reason string, before float64) {
	fmt.Printf("| %s | %d | %s | %.0f → %.0f |\n", name, status, strings.ReplaceAll(short(reason), "|", "/"), before, e.rssMB())
}

// rowBomb: identical rows compress to nothing.
func rowBomb(n int, inst string) []byte {
	rep := &wire.Report{Source: wire.Source{Service: "s", Instance: inst}, Start: time.Now().Add(-time.Second), End: time.Now(),
		Rows: make([]wire.Row, n)}
	for i := range rep.Rows {
		rep.Rows[i] = wire.Row{Tenant: "t", Route: "r", Kind: wire.KindRequest}
	}
	b, _ := rep.MarshalBinary()
	return b
}

func one(rows []wire.Row, inst string, seq uint64) []byte {
	rep := &wire.Report{Source: wire.Source{Service: "api", Instance: inst, Host: "h"}, Seq: seq,
		Start: time.Now().Add(-time.Second), End: time.Now(), Rows: rows}
	b, err := rep.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return b
}

func (e *env) hostile(args []string) int {
	fs := flag.NewFlagSet("hostile", flag.ExitOnError)
	parallel := fs.Int("parallel", 64, "hostile clients at once")
	d := fs.Duration("duration", 10*time.Second, "length of the parallel bomb run")
	sources := fs.Int("sources", 100_050, "fake sources of the source flood")
	fs.Parse(args)
	ctx := context.Background()
	ct := wire.ContentType
	fmt.Println("| case | status | reason | RSS MB before → after |")
	fmt.Println("|---|---|---|---|")

	bomb := rowBomb(wire.MaxRows, "bomb")
	r0 := e.rssMB()
	var st int
	var msg string
	// Distinct sources, so admission does not hide the cost; 64 at once,
	// as the collector holds back each refusal (--refusal-delay).
	var mu sync.Mutex
	var bwg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		bwg.Add(1)
		go func() {
			defer bwg.Done()
			for i := next.Add(1); i <= 1000; i = next.Add(1) {
				s, m, _ := e.post(ctx, "/v1/reports", ct, rowBomb(wire.MaxRows, fmt.Sprintf("bomb-%d", i)))
				mu.Lock()
				st, msg = s, m
				mu.Unlock()
			}
		}()
	}
	bwg.Wait()
	e.line(fmt.Sprintf("%d-byte body claiming %d rows (×1000)", len(bomb), wire.MaxRows), st, msg, r0)

	claim := append([]byte("qtrp"), 0, 2, 1, 0)
	claim = append(claim, 0x80, 0x80, 0x80, 0x10) // uvarint 32 MiB
	claim = append(claim, bytes.Repeat([]byte{0}, 64)...)
	r0 = e.rssMB()
	st, msg, _ = e.post(ctx, "/v1/reports", ct, claim)
	e.line("header claiming 32 MiB decompressed (×1)", st, msg, r0)

	// Quiet run (after a warm-up), then the same fleet beside parallel
	// bombs.
	e.fleet(ctx, "warm", 200, 100, time.Second, 3*time.Second)
	quiet := e.fleet(ctx, "quiet", 200, 100, time.Second, *d)
	r0 = e.rssMB()
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if v := int64(e.rssMB()); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	var bombs, bomb413 atomic.Int64
	bctx, cancel := context.WithTimeout(ctx, *d)
	for range *parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bctx.Err() == nil {
				st, _, _ := e.post(bctx, "/v1/reports", ct, bomb)
				bombs.Add(1)
				if st == 413 {
					bomb413.Add(1)
				}
			}
		}()
	}
	noisy := e.fleet(ctx, "noisy", 200, 100, time.Second, *d)
	cancel()
	close(stop)
	wg.Wait()
	fmt.Printf("| %d parallel bombs for %v (%d sent, %d got 413) | 413 | peak RSS %d MB | %.0f → %.0f |\n", *parallel, *d, bombs.Load(), bomb413.Load(), peak.Load(), r0, e.rssMB())
	fmt.Printf("|   normal reporters (200 × 1/s, 100 rows): quiet p99 %v, refused %d; beside the bombs p99 %v, refused %d | | | |\n",
		quiet.quantile(0.99).Round(100*time.Microsecond), quiet.refused.Load(), noisy.quantile(0.99).Round(100*time.Microsecond), noisy.refused.Load())

	r0 = e.rssMB()
	st, msg, _ = e.post(ctx, "/v1/reports", ct, one([]wire.Row{{Tenant: "whale", Route: "r", Kind: wire.KindRequest, Count: 1<<64 - 1}}, "ov", 1))
	e.line("count 2^64−1", st, msg, r0)
	st, msg, _ = e.post(ctx, "/v1/reports", ct, one([]wire.Row{{Tenant: "whale", Route: "r", Kind: wire.KindDB, Count: 1, Duration: 1<<63 - 1}}, "ov", 2))
	e.line("duration MaxInt64 ns", st, msg, r0)
	st, msg, _ = e.post(ctx, "/v1/reports", ct, one([]wire.Row{{Tenant: "whale", Route: "r", Kind: wire.KindRequest, Count: 1, RU: 1.79e308}}, "ov", 3))
	e.line("RU MaxFloat64", st, msg, r0)

	st, msg, _ = e.post(ctx, "/v1/reports", ct, one([]wire.Row{{Tenant: "acme\xff", Route: "r\x00", Kind: wire.KindRequest, Count: 1}}, "poison\xfe", 1))
	e.line("invalid UTF-8 tenant, route, instance (accepted, cleaned)", st, msg, r0)
	st, msg = e.get("/metrics")
	cleaned := ""
	for _, l := range strings.Split(msg, "\n") {
		if strings.HasPrefix(l, "qtop_collector_strings_cleaned_total{field=\"instance\"}") || strings.HasPrefix(l, "qtop_collector_invalid_tags_total") {
			cleaned += l + "; "
		}
	}
	e.line("GET /metrics after it", st, cleaned, r0)

	for _, q := range []string{"from=0001-01-01", "from=99999999999d", "from=2020-01-01"} {
		t0 := time.Now()
		st, msg = e.get("/v1/report?" + q)
		e.line(fmt.Sprintf("GET /v1/report?%s (%v)", q, time.Since(t0).Round(time.Millisecond)), st, msg, r0)
	}

	st, msg, _ = e.post(ctx, "/v1/reports", "application/json", one([]wire.Row{{Tenant: "acme", Route: "r", Kind: wire.KindRequest, Count: 1}}, "ct", 1))
	e.line("Content-Type application/json", st, msg, r0)

	// Source flood, then a new real process.
	r0 = e.rssMB()
	t0 := time.Now()
	var flooded atomic.Int64
	var fwg sync.WaitGroup
	per := *sources / 32
	for g := range 32 {
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			body := []wire.Row{{Tenant: "spam", Route: "r", Kind: wire.KindRequest, Count: 1}}
			for i := range per + 2 {
				if st, _, _ := e.post(ctx, "/v1/reports", ct, one(body, fmt.Sprintf("fake-%d-%d", g, i), 1)); st == 200 {
					flooded.Add(1)
				}
			}
		}()
	}
	fwg.Wait()
	fl := time.Since(t0)
	st, msg, _ = e.post(ctx, "/v1/reports", ct, one([]wire.Row{{Tenant: "acme", Route: "r", Kind: wire.KindRequest, Count: 1}}, "legit-new", 1))
	e.line(fmt.Sprintf("new real process after %d fake sources in %v", flooded.Load(), fl.Round(100*time.Millisecond)), st, msg, r0)

	// Live streams: one beyond the cap.
	var streams []*http.Response
	for range 64 {
		resp, err := e.client.Get(e.base + "/v1/live/stream")
		if err == nil {
			streams = append(streams, resp)
		}
	}
	r0 = e.rssMB()
	st, msg = e.get("/v1/live/stream")
	e.line("65th live stream", st, msg, r0)
	for _, s := range streams {
		s.Body.Close()
	}
	return 0
}

func (m tenantMix) String() string {
	if m.zipf > 1 {
		return fmt.Sprintf("Zipf %g", m.zipf)
	}
	return "uniform"
}
