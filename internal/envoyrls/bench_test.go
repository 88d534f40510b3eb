package envoyrls_test

import (
	"context"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/qtop-dev/qtop/internal/envoyrls"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// benchService is a Service whose policy throttles tier T2 at a cap no
// benchmark reaches (every answer is OK, so the answer path does all its
// work: policy, bucket check and charge, quota gate), prices acme, and
// checks a credential.
func benchService(b *testing.B, opts ...envoyrls.Option) *envoyrls.Service {
	src := &source{}
	exp := time.Now().Add(time.Hour)
	src.set(policy.Rule{ID: "t2", Tier: tenant.T2, Action: policy.Throttle, RUPerSecond: 1e9, Expires: exp, Reason: "bench"},
		policy.Rule{ID: "p", Tenant: "acme", Action: policy.Price, Multiplier: 2, Expires: exp, Reason: "bench"})
	svc, err := envoyrls.New(src, append(opts, envoyrls.WithAuth(func(h string) bool { return h == "Bearer tok" }))...)
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// tenantRequests are requests of one descriptor (tenant, route, tier T2)
// for n tenants.
func tenantRequests(n int) []*rlsv3.RateLimitRequest {
	out := make([]*rlsv3.RateLimitRequest, n)
	for i := range out {
		out[i] = req([]string{"tenant", "tenant-" + strconv.Itoa(i), "route", "GET /reports", "tier", "T2"})
	}
	return out
}

// BenchmarkDecide is the answer path in process: parse, policy, bucket,
// quota gate, the response.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run("tenants="+strconv.Itoa(n), func(b *testing.B) {
			svc, reqs := benchService(b), tenantRequests(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := svc.DecideAt(time.Now(), reqs[i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		svc, reqs := benchService(b), tenantRequests(10_000)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				svc.DecideAt(time.Now(), reqs[i%len(reqs)])
				i += 7
			}
		})
	})
}

// BenchmarkGRPCLoopback is one ShouldRateLimit call over loopback gRPC
// with Envoy's client types and the credential: one at a time
// (callers=1), from 8 callers on one connection as fast as they can
// (callers=8), and from 8 callers at a fixed offered rate of 2,000 calls
// a second (callers=8,rate=2000). It reports the latency's p50 and p99
// in µs.
func BenchmarkGRPCLoopback(b *testing.B) {
	for _, c := range []struct{ callers, rate int }{{1, 0}, {8, 0}, {8, 2000}} {
		name := "callers=" + strconv.Itoa(c.callers)
		if c.rate > 0 {
			name += ",rate=" + strconv.Itoa(c.rate)
		}
		b.Run(name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			svc := benchService(b, envoyrls.WithRegisterer(reg))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			gs := grpc.NewServer(svc.ServerOptions()...)
			svc.Register(gs)
			go gs.Serve(ln)
			defer gs.Stop()
			cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			cl := rlsv3.NewRateLimitServiceClient(cc)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok")
			reqs := tenantRequests(10_000)
			if _, err := cl.ShouldRateLimit(ctx, reqs[0]); err != nil { // connect
				b.Fatal(err)
			}
			lat := callLoopback(b, ctx, cl, reqs, c.callers, c.rate)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(serverP99(b, reg)*1e6, "server-p99≤µs")
		})
	}
}

// callLoopback makes b.N calls from callers goroutines, at rate calls a
// second (0: as fast as they can), and returns each call's latency.
func callLoopback(b *testing.B, ctx context.Context, cl rlsv3.RateLimitServiceClient, reqs []*rlsv3.RateLimitRequest, callers, rate int) []time.Duration {
	lat := make([]time.Duration, b.N)
	next := make(chan int, 1024)
	b.ResetTimer()
	go offer(next, b.N, rate)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				start := time.Now()
				resp, err := cl.ShouldRateLimit(ctx, reqs[i%len(reqs)])
				lat[i] = time.Since(start)
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					b.Error(err, resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	return lat
}

// serverP99 is the upper bound of the qtop_rls_answer_seconds bucket
// that holds the 99th percentile: the service's own part of a call, from
// its decoded message to its answer.
func serverP99(b *testing.B, reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "qtop_rls_answer_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		for _, bk := range h.GetBucket() {
			if float64(bk.GetCumulativeCount()) >= 0.99*float64(h.GetSampleCount()) {
				return bk.GetUpperBound()
			}
		}
	}
	return math.Inf(1)
}

// offer sends 0 … n−1 on next, at rate a second (0: at once), and closes
// it. Paced by a 1 ms ticker: each tick releases the calls due by then.
func offer(next chan<- int, n, rate int) {
	defer close(next)
	if rate <= 0 {
		for i := range n {
			next <- i
		}
		return
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start, i := time.Now(), 0
	for i < n {
		<-t.C
		for due := min(n, int(time.Since(start).Seconds()*float64(rate))); i < due; i++ {
			next <- i
		}
	}
}
