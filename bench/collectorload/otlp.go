package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// otlpGRPCHostile is issue 25's first case against a running collector's
// --otlp-grpc: conns connections × streams concurrent exports of mb MiB
// each, in a loop for the duration, with a wrong token (-as wrong), the
// right one (-as auth), gzip-compressed or not, while a normal fleet
// (the load mode's reporters) reports beside it. It prints the export
// answers by code, the collector's RSS before, at its peak and after, and
// the fleet's latency.
func (e *env) otlpGRPCHostile(args []string) int {
	fs := flag.NewFlagSet("otlp-grpc-hostile", flag.ExitOnError)
	target := fs.String("grpc", "127.0.0.1:14317", "the collector's --otlp-grpc address")
	conns := fs.Int("conns", 2, "gRPC connections")
	streams := fs.Int("streams", 8, "concurrent exports per connection")
	mb := fs.Int("mb", 60, "MiB per export message")
	as := fs.String("as", "wrong", "credential: wrong (a wrong token) or auth (the -token)")
	gz := fs.Bool("gzip", false, "compress the messages with gzip")
	d := fs.Duration("duration", 20*time.Second, "length of the run")
	reporters := fs.Int("reporters", 200, "normal reporting processes beside the attack (0: none)")
	rows := fs.Int("rows", 100, "tenant rows per normal report")
	interval := fs.Duration("interval", time.Second, "each normal process sends one report per interval")
	pause := fs.Duration("pause", 100*time.Millisecond, "an attacker's pause after a refused export")
	fit := fs.Bool("fit", false, "spans large enough that a message holds 190,000 (under the receiver's 200,000 a request), so every admitted message is decoded in full rather than refused from its span count")
	fs.Parse(args)

	perSpan := 0
	if *fit {
		perSpan = (*mb << 20) / 190_000
	}
	msg := hugeExport(*mb<<20, perSpan)
	token := "Bearer wrong-" + fmt.Sprint(time.Now().UnixNano())
	if *as == "auth" {
		token = "Bearer " + e.token
	}
	opts := []grpc.CallOption{grpc.ForceCodec(bytesCodec{}), grpc.MaxCallSendMsgSize(len(msg) + 1)}
	sent := len(msg)
	if *gz {
		// Compressed once, sent as is by every call: the generator's CPU
		// goes to sending, not to compressing 60 MiB per call.
		z := gzipOf(msg)
		sent = len(z)
		encoding.RegisterCompressor(pregzip{z})
		opts = append(opts, grpc.UseCompressor("gzip"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *d)
	defer cancel()
	rss0 := e.rssMB()
	var peak atomic.Int64
	go e.samplePeak(ctx, &peak)
	start := make(chan struct{})
	e.prepared = func() { close(start) }
	if *reporters == 0 {
		close(start)
	}

	var answers codeTally
	count := answers.count
	var wg sync.WaitGroup
	for range *conns {
		cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		defer cc.Close()
		for range *streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-start:
				case <-ctx.Done():
				}
				attackGRPC(ctx, cc, token, msg, opts, *pause, count)
			}()
		}
	}
	var fleet *result
	if *reporters > 0 {
		fleet = e.fleet(ctx, "otlp-neighbour", *reporters, *rows, *interval, *d-time.Second)
	}
	wg.Wait()
	fmt.Printf("otlp-grpc-hostile: %d conns × %d streams × %d MiB (%d bytes sent per message), token %s, gzip %v, %v\n", *conns, *streams, *mb, sent, *as, *gz, *d)
	answers.print()
	fmt.Printf("  collector RSS %.0f MB before, %.0f MB peak, %.0f MB after\n", rss0, float64(peak.Load())/1024, e.rssMB())
	printFleet(fleet, *reporters, *rows, *interval)
	return 0
}

// printFleet prints the normal fleet's figures beside an attack.
func printFleet(fleet *result, reporters, rows int, interval time.Duration) {
	if fleet == nil {
		return
	}
	fmt.Printf("  normal reporters (%d × 1/%v, %d rows): sent %d, accepted %d, refused %d (%.1f%%), failed %d, p50 %v p99 %v\n",
		reporters, interval, rows, fleet.sent.Load(), fleet.ok.Load(), fleet.refused.Load(),
		100*float64(fleet.refused.Load())/float64(max(1, fleet.sent.Load())), fleet.failed.Load(),
		fleet.quantile(0.5).Round(100*time.Microsecond), fleet.quantile(0.99).Round(100*time.Microsecond))
	for w, n := range fleet.why {
		fmt.Printf("  refused %d× %s\n", n, w)
	}
}

// codeTally counts gRPC answers by code and keeps the first message of
// each code.
type codeTally struct {
	codes, examples sync.Map // code → *atomic.Int64, code → its first message
}

func (t *codeTally) count(err error) {
	c := status.Code(err).String()
	v, _ := t.codes.LoadOrStore(c, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	if err != nil {
		t.examples.LoadOrStore(c, status.Convert(err).Message())
	}
}

// print prints the counts, then each code's first message.
func (t *codeTally) print() {
	var parts []string
	t.codes.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	fmt.Printf("  exports answered: %s\n", strings.Join(parts, ", "))
	t.examples.Range(func(k, v any) bool {
		fmt.Printf("    %s: %.200s\n", k, v)
		return true
	})
}

// attackGRPC exports msg over cc in a loop until ctx ends, counting the
// answers; after a refusal it pauses (a hostile client that does not
// honour RetryInfo, but does not spin either).
func attackGRPC(ctx context.Context, cc *grpc.ClientConn, token string, msg []byte, opts []grpc.CallOption, pause time.Duration, count func(error)) {
	for ctx.Err() == nil {
		cctx := metadata.AppendToOutgoingContext(ctx, "authorization", token)
		var out []byte
		err := cc.Invoke(cctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", msg, &out, opts...)
		if ctx.Err() == nil {
			count(err)
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}
}

// samplePeak keeps the collector's highest RSS (KiB) every 50 ms.
func (e *env) samplePeak(ctx context.Context, peak *atomic.Int64) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if kb := int64(e.rssMB() * 1024); kb > peak.Load() {
			peak.Store(kb)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// hugeExport is a valid export request of about n bytes: SERVER spans of
// one tenant with a long route (so they map and record like real ones),
// each of about perSpan bytes when that is more than the route makes.
func hugeExport(n, perSpan int) []byte {
	route := strings.Repeat("r", max(200, perSpan-110))
	sp := &tracepb.Span{TraceId: make([]byte, 16), SpanId: make([]byte, 8), Name: "GET", Kind: tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(time.Now().UnixNano()), EndTimeUnixNano: uint64(time.Now().UnixNano()) + 1e6,
		Attributes: []*commonpb.KeyValue{
			{Key: "tenant.id", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "hostile"}}},
			{Key: "http.route", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: route}}},
		}}
	per := proto.Size(sp) + 3
	spans := make([]*tracepb.Span, max(1, n/per))
	for i := range spans {
		spans[i] = sp
	}
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "hostile"}}}}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}})
	if err != nil {
		panic(err)
	}
	return b
}

// bytesCodec sends []byte as they are and reads the answer as bytes.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }
func (bytesCodec) Marshal(v any) ([]byte, error) {
	return v.([]byte), nil
}
func (bytesCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append((*v.(*[]byte))[:0], data...)
	return nil
}

// otlpHTTPHostile is issue 25's third case against POST /v1/traces, with
// a normal fleet beside it: slow (two clients trickle a body at 1 B/s
// while a normal OTLP client exports once a second), junk (one client
// posts a wrong token in a loop: answers a second), bomb (clients post a
// gzip bomb of -bomb-mb MiB of zeros in a loop with the right token).
func (e *env) otlpHTTPHostile(args []string) int {
	fs := flag.NewFlagSet("otlp-http-hostile", flag.ExitOnError)
	kind := fs.String("case", "slow", "slow, junk or bomb")
	clients := fs.Int("clients", 2, "hostile clients")
	d := fs.Duration("duration", 30*time.Second, "length of the run")
	reporters := fs.Int("reporters", 200, "normal reporting processes beside the attack (0: none)")
	rows := fs.Int("rows", 100, "tenant rows per normal report")
	interval := fs.Duration("interval", time.Second, "each normal process sends one report per interval")
	bombMB := fs.Int("bomb-mb", 256, "MiB of zeros in the gzip bomb")
	fs.Parse(args)
	var bomb []byte
	if *kind == "bomb" {
		bomb = gzipBomb(*bombMB << 20) // before the run's clock starts
	}
	ctx, cancel := context.WithTimeout(context.Background(), *d)
	defer cancel()
	rss0 := e.rssMB()
	var peak atomic.Int64
	go e.samplePeak(ctx, &peak)
	answers := &result{}
	normal := &result{}
	start := make(chan struct{})
	e.prepared = func() { close(start) }
	if *reporters == 0 {
		close(start)
	}
	var wg sync.WaitGroup
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-start:
			case <-ctx.Done():
			}
			e.hostileHTTPClient(ctx, *kind, bomb, answers)
		}()
	}
	if *kind == "slow" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.normalOTLP(ctx, start, normal)
		}()
	}
	var fleet *result
	if *reporters > 0 {
		fleet = e.fleet(ctx, "otlp-neighbour", *reporters, *rows, *interval, *d-time.Second)
	}
	wg.Wait()
	fmt.Printf("otlp-http-hostile %s: %d clients, %v\n", *kind, *clients, *d)
	fmt.Printf("  hostile requests answered: %d (%.1f/s)", answers.sent.Load(), float64(answers.sent.Load())/d.Seconds())
	for w, n := range answers.why {
		fmt.Printf("; %d× %s", n, w)
	}
	fmt.Println()
	if normal.sent.Load() > 0 {
		fmt.Printf("  normal OTLP client: %d of %d tries accepted, p99 %v", normal.ok.Load(), normal.sent.Load(), normal.quantile(0.99).Round(time.Millisecond))
		for w, n := range normal.why {
			fmt.Printf("; %d× %s", n, w)
		}
		fmt.Println()
	}
	fmt.Printf("  collector RSS %.0f MB before, %.0f MB peak, %.0f MB after\n", rss0, float64(peak.Load())/1024, e.rssMB())
	printFleet(fleet, *reporters, *rows, *interval)
	return 0
}

// normalOTLP is a normal OTLP client exporting once a second from start
// until ctx ends.
func (e *env) normalOTLP(ctx context.Context, start <-chan struct{}, res *result) {
	body := hugeExport(64<<10, 0)
	select {
	case <-start:
	case <-ctx.Done():
	}
	for ctx.Err() == nil {
		st, msg, lat := e.post(ctx, "/v1/traces", "application/x-protobuf", body)
		if ctx.Err() == nil {
			res.add(st, lat, msg)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// hostileHTTPClient runs one hostile client of otlpHTTPHostile until ctx
// ends, counting its answers in res.
func (e *env) hostileHTTPClient(ctx context.Context, kind string, bomb []byte, res *result) {
	switch kind {
	case "slow":
		for ctx.Err() == nil {
			pr, pw := io.Pipe()
			go func() {
				defer pw.Close()
				for i := 0; i < 1<<20 && ctx.Err() == nil; i++ {
					if _, err := pw.Write([]byte{0x0a}); err != nil {
						return
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/traces", pr)
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("Authorization", "Bearer "+e.token)
			req.ContentLength = 1 << 20
			t0 := time.Now()
			resp, err := (&http.Client{}).Do(req)
			if err != nil {
				if ctx.Err() == nil {
					res.add(0, time.Since(t0), err.Error())
				}
				pr.Close()
				continue
			}
			resp.Body.Close()
			pr.Close()
			res.add(resp.StatusCode, time.Since(t0), resp.Status)
		}
	case "junk":
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/traces", strings.NewReader("junk"))
			req.Header.Set("Content-Type", "application/x-protobuf")
			req.Header.Set("Authorization", "Bearer wrong")
			t0 := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if ctx.Err() == nil {
				res.add(resp.StatusCode, time.Since(t0), resp.Status)
			}
		}
	case "bomb":
		for ctx.Err() == nil {
			st, msg, lat := e.post(ctx, "/v1/traces", "application/x-protobuf", bomb, "Content-Encoding", "gzip")
			if ctx.Err() == nil {
				res.add(st, lat, msg)
			}
		}
	}
}

// gzipBomb is n zero bytes, gzip-compressed (about n/1000 bytes).
func gzipBomb(n int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zero := make([]byte, 1<<20)
	for i := 0; i < n; i += len(zero) {
		zw.Write(zero)
	}
	zw.Close()
	return buf.Bytes()
}

// pregzip is a gzip "compressor" that writes the message compressed
// beforehand, whatever it is given (the load tool sends one message).
type pregzip struct{ z []byte }

func (p pregzip) Name() string { return "gzip" }
func (p pregzip) Compress(w io.Writer) (io.WriteCloser, error) {
	return &pregzipWriter{w: w, z: p.z}, nil
}
func (p pregzip) Decompress(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }

type pregzipWriter struct {
	w io.Writer
	z []byte
}

func (pw *pregzipWriter) Write(b []byte) (int, error) { return len(b), nil }
func (pw *pregzipWriter) Close() error {
	_, err := pw.w.Write(pw.z)
	return err
}

func gzipOf(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}
