package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// otlpGRPCFleet is a fleet of OTLP/gRPC exporters against a running
// collector's --otlp-grpc: each its own process's connection (as an SDK
// keeps one while its process runs), exporting one small request every
// interval with an SDK's 10 s timeout. It prints how many exports were
// taken, how many exporters had one fail, and the collector's resident
// memory before, while connected and after, so that the cost of an
// idle connection and --otlp-grpc-max-conns can be measured.
func (e *env) otlpGRPCFleet(args []string) int {
	fs := flag.NewFlagSet("otlp-grpc-fleet", flag.ExitOnError)
	target := fs.String("grpc", "127.0.0.1:14317", "the collector's --otlp-grpc address")
	n := fs.Int("exporters", 100, "exporting processes (a connection each)")
	every := fs.Duration("interval", time.Second, "each exporter sends one request per interval")
	d := fs.Duration("duration", 20*time.Second, "length of the run")
	fs.Parse(args)

	before := e.rssMB()
	var ok, failed atomic.Int64
	hurt := make([]atomic.Bool, *n)
	var connected sync.WaitGroup // each exporter's first answer
	connected.Add(*n)
	var wg sync.WaitGroup
	end := time.Now().Add(*d)
	for i := range *n {
		wg.Go(func() {
			first := true
			defer func() {
				if first {
					connected.Done()
				}
			}()
			cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				panic(err)
			}
			defer cc.Close()
			client := coltracepb.NewTraceServiceClient(cc)
			svc := fmt.Sprintf("fleet-%04d", i)
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if e.token != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.token)
				}
				_, err := client.Export(ctx, smallExport(svc, i))
				cancel()
				if err != nil {
					failed.Add(1)
					hurt[i].Store(true)
				} else {
					ok.Add(1)
				}
				if first {
					first = false
					connected.Done()
				}
				time.Sleep(*every)
			}
		})
	}
	connected.Wait()
	during := e.rssMB()
	wg.Wait()
	n2 := 0
	for i := range hurt {
		if hurt[i].Load() {
			n2++
		}
	}
	fmt.Printf("exporters %d, every %v for %v: exports taken %d, failed %d; exporters with a failed export %d\n", *n, *every, *d, ok.Load(), failed.Load(), n2)
	fmt.Printf("collector RSS: before %.1f MB, all connected %.1f MB (%.1f KiB per exporter), after %.1f MB\n",
		before, during, (during-before)*1024/float64(*n), e.rssMB())
	if failed.Load() > 0 {
		return 1
	}
	return 0
}

// smallExport is one server span of tenant acme from service svc.
func smallExport(svc string, i int) *coltracepb.ExportTraceServiceRequest {
	now := uint64(time.Now().UnixNano())
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", svc)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: make([]byte, 16), SpanId: []byte{1, 2, 3, 4, 5, 6, byte(i >> 8), byte(i)}, Name: "GET /x",
			Kind: tracepb.Span_SPAN_KIND_SERVER, StartTimeUnixNano: now - uint64(time.Millisecond), EndTimeUnixNano: now,
			Attributes: []*commonpb.KeyValue{str("tenant.id", "acme"), str("http.route", "/x")},
		}}}},
	}}}
}
