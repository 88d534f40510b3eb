package envoyrls_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
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
func benchService(b *testing.B) *envoyrls.Service {
	src := &source{}
	exp := time.Now().Add(time.Hour)
	src.set(policy.Rule{ID: "t2", Tier: tenant.T2, Action: policy.Throttle, RUPerSecond: 1e9, Expires: exp, Reason: "bench"},
		policy.Rule{ID: "p", Tenant: "acme", Action: policy.Price, Multiplier: 2, Expires: exp, Reason: "bench"})
	svc, err := envoyrls.New(src, envoyrls.WithAuth(func(h string) bool { return h == "Bearer tok" }))
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
// with Envoy's client types and the credential, one at a time
// (callers=1) or from 8 callers on one connection; it reports the
// latency's p50 and p99 in µs.
func BenchmarkGRPCLoopback(b *testing.B) {
	for _, callers := range []int{1, 8} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			svc := benchService(b)
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
			lat := callLoopback(b, ctx, cl, reqs, callers)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// callLoopback makes b.N calls from callers goroutines and returns each
// call's latency.
func callLoopback(b *testing.B, ctx context.Context, cl rlsv3.RateLimitServiceClient, reqs []*rlsv3.RateLimitRequest, callers int) []time.Duration {
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < b.N; i += callers {
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
