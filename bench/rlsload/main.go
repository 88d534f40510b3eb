// Command rlsload calls a running collector's Envoy rate-limit service
// (collector serve --rls-listen) from a process of its own, as Envoy
// would: ShouldRateLimit with go-control-plane's types and the report
// token, descriptors (tenant, route, tier) of -tenants tenants in turn,
// from -callers goroutines on one connection at a fixed offered rate,
// open loop (each call has its scheduled time; "late" counts from it, so
// a client that falls behind is charged for its queue). It prints the
// latency percentiles of the calls (from send, and from schedule) and
// the collector's CPU per call when -pid names it.
//
//	collector serve --store none --data-dir "$(mktemp -d)" --token-file tok --rls-listen 127.0.0.1:18081 &
//	taskset -c 0 go run ./rlsload -addr 127.0.0.1:18081 -token-file tok -pid $! -rate 2000 -callers 8 \
//	    -policy http://127.0.0.1:7070 -admin-token-file "$DATA_DIR/admin-token"
//
// With -policy URL it first posts the rules BenchmarkGRPCLoopback in
// internal/envoyrls answers under (a throttle of tier T2 that no call
// reaches, a price for one tenant), so every answer does all its work.
//
// "rlsload bare -listen ADDR" serves the same service with nothing in it
// (OK to every descriptor, no credential): the floor of a gRPC call on the
// machine, to load beside the collector in the same run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "bare" {
		if err := bare(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "rlsload bare:", err)
			os.Exit(1)
		}
		return
	}
	addr := flag.String("addr", "127.0.0.1:18081", "the collector's --rls-listen")
	tokenFile := flag.String("token-file", "", "the collector's report token")
	pol := flag.String("policy", "", "the collector's HTTP address, to post the rules first (e.g. http://127.0.0.1:7070)")
	adminFile := flag.String("admin-token-file", "", "the collector's admin token, for -policy (its --admin-token-file, or admin-token in its data dir)")
	rate := flag.Int("rate", 2000, "offered calls a second")
	callers := flag.Int("callers", 8, "goroutines calling on the one connection")
	tenants := flag.Int("tenants", 10000, "tenants in turn")
	dur := flag.Duration("duration", 10*time.Second, "measured time")
	warm := flag.Duration("warmup", 2*time.Second, "calls before measuring")
	pid := flag.Int("pid", 0, "the collector's process, for its CPU per call")
	flag.Parse()
	if err := run(*addr, *tokenFile, *adminFile, *pol, *rate, *callers, *tenants, *dur, *warm, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "rlsload:", err)
		os.Exit(1)
	}
}

func run(addr, tokenFile, adminFile, pol string, rate, callers, tenants int, dur, warm time.Duration, pid int) error {
	tok, err := readToken(tokenFile)
	if err != nil {
		return err
	}
	admin, err := readToken(adminFile)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if pol != "" {
		c, err := api.NewClient(pol)
		if err != nil {
			return err
		}
		exp := time.Now().Add(time.Hour)
		for _, r := range []policy.Rule{
			{ID: "rlsload-t2", Tier: tenant.T2, Action: policy.Throttle, RUPerSecond: 1e9, Expires: exp, Reason: "rlsload"},
			{ID: "rlsload-price", Tenant: "tenant-1", Action: policy.Price, Multiplier: 2, Expires: exp, Reason: "rlsload"},
		} {
			if _, err := c.PostPolicy(ctx, r, admin); err != nil {
				return fmt.Errorf("post policy: %w", err)
			}
		}
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	cl := rlsv3.NewRateLimitServiceClient(cc)
	if tok != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	reqs := make([]*rlsv3.RateLimitRequest, tenants)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "qtop", HitsAddend: 1, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
				{Key: "tenant", Value: "tenant-" + strconv.Itoa(i)}, {Key: "route", Value: "GET /reports"}, {Key: "tier", Value: "T2"}}}}}
	}
	if _, err := cl.ShouldRateLimit(ctx, reqs[0]); err != nil {
		return fmt.Errorf("first call: %w", err)
	}
	n := int((warm + dur).Seconds() * float64(rate))
	skip := int(warm.Seconds() * float64(rate))
	sent := make([]time.Duration, n)
	late := make([]time.Duration, n)
	type call struct {
		i  int
		at time.Time
	}
	next := make(chan call, 4096)
	var failed atomic.Int64
	var firstFailure sync.Once
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for c := range next {
				start := time.Now()
				resp, err := cl.ShouldRateLimit(ctx, reqs[c.i%len(reqs)])
				end := time.Now()
				sent[c.i], late[c.i] = end.Sub(start), end.Sub(c.at)
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					failed.Add(1)
					firstFailure.Do(func() { fmt.Fprintln(os.Stderr, "rlsload: a call failed:", err, resp.GetOverallCode()) })
				}
			}
		})
	}
	var cpu0 float64
	t0 := time.Now()
	period := time.Second / time.Duration(rate)
	for i := range n {
		at := t0.Add(time.Duration(i) * period)
		if i == skip && pid > 0 {
			cpu0 = cpuSeconds(pid)
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		next <- call{i, at}
	}
	close(next)
	wg.Wait()
	cpu := 0.0
	if pid > 0 {
		cpu = cpuSeconds(pid) - cpu0
	}
	s, l := sent[skip:], late[skip:]
	slices.Sort(s)
	slices.Sort(l)
	q := func(d []time.Duration, p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	fmt.Printf("calls %d at %d/s from %d callers: from send p50 %.0f µs p99 %.0f µs p99.9 %.0f µs max %.0f µs; from schedule p50 %.0f p99 %.0f µs; failed %d",
		len(s), rate, callers, q(s, 0.5), q(s, 0.99), q(s, 0.999), q(s, 1), q(l, 0.5), q(l, 0.99), failed.Load())
	if pid > 0 {
		fmt.Printf("; collector CPU %.1f µs a call", cpu/float64(len(s))*1e6)
	}
	fmt.Println()
	return nil
}

// readToken is the token in file, "" for no file.
func readToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	return strings.TrimSpace(string(b)), err
}

// cpuSeconds is the user and system time of process pid, from /proc.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}
