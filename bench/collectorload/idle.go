package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// otlpGRPCIdle holds OTLP/gRPC streams that send their headers and nothing
// else against a running collector's --otlp-grpc — conns connections ×
// streams each, every one opened again as soon as the collector cuts it —
// while one exporter on a connection of its own exports a small request
// every interval. It prints the exporter's answers by code and how many
// idle streams were opened: what such a client costs the exporters
// beside it. With -junk, each idle connection also sends frames that
// carry no message (junkConn).
func (e *env) otlpGRPCIdle(args []string) int {
	fs := flag.NewFlagSet("otlp-grpc-idle", flag.ExitOnError)
	target := fs.String("grpc", "127.0.0.1:14317", "the collector's --otlp-grpc address")
	conns := fs.Int("conns", 2, "connections holding idle streams")
	streams := fs.Int("streams", 4, "idle streams per connection")
	every := fs.Duration("interval", 50*time.Millisecond, "the exporter's pause between exports")
	junk := fs.Int("junk", 0, "KiB/s of frames of a type HTTP/2 ignores each idle connection sends beside its streams (0: none; the connections are then raw HTTP/2, not gRPC's)")
	d := fs.Duration("duration", 10*time.Second, "length of the run")
	fs.Parse(args)

	ctx, cancel := context.WithTimeout(context.Background(), *d)
	defer cancel()
	if e.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.token)
	}
	dial := func() *grpc.ClientConn {
		cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			panic(err)
		}
		return cc
	}
	var opened atomic.Int64
	var wg sync.WaitGroup
	for range *conns {
		if *junk > 0 {
			wg.Go(func() { junkConn(ctx, *target, e.token, *streams, *junk, &opened) })
			continue
		}
		cc := dial()
		defer cc.Close()
		for range *streams {
			wg.Go(func() {
				for ctx.Err() == nil {
					s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
						"/opentelemetry.proto.collector.trace.v1.TraceService/Export")
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					opened.Add(1)
					var out coltracepb.ExportTraceServiceResponse
					s.RecvMsg(&out) // until the collector cuts it, or the run ends
				}
			})
		}
	}
	time.Sleep(300 * time.Millisecond) // the idle streams first
	cc := dial()
	defer cc.Close()
	client := coltracepb.NewTraceServiceClient(cc)
	answers := map[string]int{}
	for i := 0; ctx.Err() == nil; i++ {
		c, done := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.Export(c, smallExport("exporter", i))
		done()
		if ctx.Err() != nil {
			break
		}
		answers[status.Code(err).String()]++
		time.Sleep(*every)
	}
	wg.Wait()
	for _, code := range slices.Sorted(maps.Keys(answers)) {
		fmt.Printf("exports %s: %d\n", code, answers[code])
	}
	fmt.Printf("idle streams opened: %d\n", opened.Load())
	if answers["OK"] == 0 {
		return 1
	}
	return 0
}
