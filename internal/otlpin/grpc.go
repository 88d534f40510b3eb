package otlpin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// GRPCServerOptions are the options a gRPC server needs to serve the
// receiver (RegisterGRPC), and to protect it. Before a stream is taken
// (a tap on its headers, before one byte of its message is read): the
// credential (WithAuth; a refusal is held back by WithRefusalHold), and a
// reservation in the memory budget (WithMemory), at most half of it per
// connection: on GRPCListener grpcStep, grown as the connection delivers
// the message (connMeter), elsewhere twice the message limit (gRPC's
// buffers and the message's copy); a stream that finds the budget taken
// after waiting briefly for a release is answered UNAVAILABLE with a retry
// delay. The message must then arrive at WithMinRate after its grace when
// the server serves on GRPCListener (rateWatch), and within
// WithGRPCReadTimeout. The message limit is WithGRPCMaxMessage (gRPC
// checks it on the wire, before reading the message; the receiver after
// decompression). A gzip message reaches the handler as sent (heldGzip)
// and is decompressed there, once its stream holds the memory it may
// expand to (meter.MaxExpansion times the bytes received, at most the
// limit), not by gRPC before anything is reserved. A stream's headers are
// bounded (grpcMaxHeaders), streams per connection are bounded, and the
// flow-control windows are fixed (1 MiB) so a connection buffers at most
// that much unread. The codec keeps the
// export request in gRPC's buffers until its decode is admitted (a large
// message waits for the one large decode: admit.go), then copies it into
// a reused buffer for the receiver's wire walk instead of decoding it into
// messages. Streams are served by a fixed set of workers rather than a
// goroutine each.
func (r *Receiver) GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(r.cfg.grpcMax)),
		grpc.ForceServerCodecV2(heldCodec{}),
		grpc.MaxConcurrentStreams(uint32(4 * r.cfg.inflight)),
		grpc.InTapHandle(r.tapGRPC),
		grpc.RPCDecompressor(heldGzip{}),
		grpc.MaxHeaderListSize(grpcMaxHeaders),
		grpc.InitialWindowSize(grpcWindow),
		grpc.InitialConnWindowSize(grpcWindow),
		grpc.NumStreamWorkers(uint32(max(2, r.cfg.inflight))),
	}
}

// grpcMaxHeaders bounds a stream's header list (gRPC's default is 16 MiB,
// buffered before the tap: a header block without its end pinned ~14 MB a
// connection, no token needed). An exporter's headers are a few hundred
// bytes, a bearer token a few KiB.
const grpcMaxHeaders = 32 << 10

// grpcWindow is the fixed HTTP/2 flow-control window of a stream and of a
// connection (a fixed window turns off gRPC's dynamic growth to 16 MiB).
const grpcWindow = 1 << 20

// exportMethod is the full name of the one method served.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// tapGRPC admits a stream from its headers alone, before its message is
// read. It runs on the connection's reader, so it waits only where that
// stalls nobody: to hold back a refusal, and for memory when the
// connection has no other stream admitted (an SDK exporter's connection
// carries one export at a time); a stream beside others of its connection
// that finds the memory taken is answered busy at once.
func (r *Receiver) tapGRPC(ctx context.Context, info *tap.Info) (context.Context, error) {
	if info.FullMethodName != exportMethod {
		return ctx, nil // gRPC answers UNIMPLEMENTED without reading it
	}
	if r.cfg.auth != nil {
		auth := ""
		if v := info.Header.Get("authorization"); len(v) > 0 {
			auth = v[0]
		}
		if !r.cfg.auth(auth) {
			r.met.requests.WithLabelValues("grpc", reqUnauthorized).Inc()
			r.hold(ctx)
			return nil, status.Error(codes.Unauthenticated, errBadToken)
		}
	}
	if retry, err := r.cfg.admitted(-1); err != nil {
		r.met.requests.WithLabelValues("grpc", reqRefused).Inc()
		st, _ := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
		return nil, st.Err()
	}
	conn := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		conn = p.Addr.String()
	}
	st := &tappedStream{r: r, conn: conn, unwatch: func() {}}
	// On a connection the receiver meters (GRPCListener) the stream takes
	// grpcStep and its connection's pool grows as the bytes arrive
	// (connMeter.grow); elsewhere it takes the most its message may hold.
	need := grpcReserve(r.cfg.grpcMax)
	if v, ok := r.meters.Load(conn); ok {
		st.m, need = v.(*connMeter), grpcStep
	}
	wait := reserveWait
	if r.mem.holds(conn) {
		wait = 0
	}
	if err := r.mem.takeWait(ctx, conn, need, wait); err != nil {
		r.met.requests.WithLabelValues("grpc", reqBusy).Inc()
		st, _ := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retrySlots)})
		return nil, st.Err()
	}
	// The handler gives the memory back before its answer goes (so the
	// client's next export finds it free); the stream's context ends with
	// the stream (answered, reset, or its connection gone), which gives it
	// back if the handler never ran; the read timeout ends it early for a
	// message that does not arrive in time, the rate watch (GRPCListener)
	// for one that trickles in, or not at all, after the grace, and the
	// connection's pool for one whose bytes find the budget taken.
	ctx, cut := context.WithCancelCause(ctx)
	ctx, cancel := context.WithTimeoutCause(ctx, r.cfg.grpcRead, errReadTimeout)
	if st.m == nil {
		st.own = need
	} else {
		st.m.open(st, need, cut)
		st.unwatch = watchRate(st.m, &r.cfg, func() {
			r.met.requests.WithLabelValues("grpc", reqSlow).Inc()
			cancel()
		})
	}
	showMemory(r)
	st.stop = context.AfterFunc(ctx, func() {
		if context.Cause(ctx) == errReadTimeout {
			r.met.requests.WithLabelValues("grpc", reqSlow).Inc()
		}
		st.release()
		cancel() // ended already; this frees the timer now
		cut(nil)
	})
	return context.WithValue(ctx, tappedKey{}, st), nil
}

// errBadToken is the refusal of a request without the report token.
const errBadToken = "missing or wrong bearer token: send the collector's report token (its --token), as authorization: Bearer TOKEN"

// errReadTimeout ends a stream whose message took longer than
// WithGRPCReadTimeout.
var errReadTimeout = errors.New("otlpin: the message did not arrive within the gRPC read timeout")

// tappedStream is a stream the tap admitted, under tappedKey in its
// context: the memory it holds itself (own: on an unmetered connection
// from the tap, on a metered one from its message's arrival), the watch
// on its message's rate, and the fallback that gives its memory back when
// its context ends.
type tappedStream struct {
	r       *Receiver
	m       *connMeter // nil: a connection the receiver does not meter
	conn    string
	unwatch func()      // ends the rate watch; may be called more than once
	stop    func() bool // stops the fallback

	mu    sync.Mutex
	own   int64
	freed bool
}

type tappedKey struct{}

// received tells the stream its message is in: size bytes, decoded. The
// rate watch ends, and on a metered connection the message's memory moves
// from the connection's pool to the stream: twice its size, what the pool
// does not hold of it (a message gzip expanded beyond the bytes sent) taken
// from the budget, waiting up to reserveWait; if it does not fit, the
// error says so (the message is answered busy).
func (st *tappedStream) received(ctx context.Context, size int64) error {
	st.unwatch()
	if st.m == nil {
		return nil
	}
	own := st.m.settle(st, size)
	var err error
	if short := 2*size - own; short > 0 {
		if err = st.r.mem.takeWait(ctx, st.conn, short, reserveWait); err == nil {
			own += short
		}
	}
	st.mu.Lock()
	if !st.freed {
		st.own, own = st.own+own, 0
	}
	st.mu.Unlock()
	if own > 0 { // released meanwhile
		st.r.mem.give(st.conn, own)
	}
	showMemory(st.r)
	return err
}

// reserve takes n more bytes of the budget for the stream, waiting up to
// reserveWait.
func (st *tappedStream) reserve(ctx context.Context, n int64) error {
	if err := st.r.mem.takeWait(ctx, st.conn, n, reserveWait); err != nil {
		return err
	}
	st.mu.Lock()
	freed := st.freed
	if !freed {
		st.own += n
	}
	st.mu.Unlock()
	if freed {
		st.r.mem.give(st.conn, n)
	}
	showMemory(st.r)
	return nil
}

// release gives back what the stream holds (more than once is harmless).
func (st *tappedStream) release() {
	st.unwatch()
	if st.m != nil {
		st.m.drop(st)
	}
	st.mu.Lock()
	own := st.own
	st.own, st.freed = 0, true
	st.mu.Unlock()
	if own > 0 {
		st.r.mem.give(st.conn, own)
	}
	showMemory(st.r)
}

// streamReceived tells ctx's stream that its message (size bytes) is in;
// an error (ErrBusy) says its memory does not fit.
func streamReceived(ctx context.Context, size int64) error {
	if st, ok := ctx.Value(tappedKey{}).(*tappedStream); ok {
		return st.received(ctx, size)
	}
	return nil
}

// releaseStream gives back the memory of ctx's stream.
func releaseStream(ctx context.Context) {
	if st, ok := ctx.Value(tappedKey{}).(*tappedStream); ok {
		st.stop() // the fallback is not needed: no goroutine at the stream's end
		st.release()
	}
}

// grpcReserve is the most a gRPC stream's message may hold: gRPC reads it
// (up to the message limit) into buffers of its own, then it is copied
// into one slice for the wire walk, so twice the limit at the peak. An
// admitted stream reserves it at once on a connection the receiver does
// not meter; on one it does, its memory follows its bytes up to it.
func grpcReserve(maxMsg int64) int64 { return 2 * maxMsg }

// grpcStep is what a stream admitted on a metered connection reserves
// first: twice gRPC's read buffer (32 KiB), the most of its message the
// connection may have read before the tap saw its headers, with room.
const grpcStep = 2 * 64 << 10

// gzipped says whether ctx's stream's message came gzip (its
// grpc-encoding), so heldGzip handed it over as sent. gRPC's server stream
// tells, though not through an interface of its own.
func gzipped(ctx context.Context) bool {
	s, ok := grpc.ServerTransportStreamFromContext(ctx).(interface{ RecvCompress() string })
	return ok && s.RecvCompress() == "gzip"
}

// heldGzip is the server's gzip "decompressor": it hands a gzip message
// to the handler as sent (a copy of gRPC's buffers, the bytes received),
// and exportGRPC decompresses it once its stream holds the memory it may
// expand to. gRPC would otherwise expand every waiting stream's message
// before the receiver could reserve a byte of it.
type heldGzip struct{}

var _ grpc.Decompressor = heldGzip{} //nolint:staticcheck // the server option that takes one per server, not a global registration

func (heldGzip) Type() string { return "gzip" }

func (heldGzip) Do(src io.Reader) ([]byte, error) {
	z, err := io.ReadAll(src)
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
	}
	return z, nil
}

// RegisterGRPC registers the OTLP trace service
// (opentelemetry.proto.collector.trace.v1.TraceService/Export) on s, which
// must have been made with GRPCServerOptions.
func (r *Receiver) RegisterGRPC(s *grpc.Server) { s.RegisterService(&traceServiceDesc, r) }

// rawRequest is an export request left in its wire form.
type rawRequest []byte

// rawCodec reads a rawRequest as its bytes and everything else as
// protobuf.
type rawCodec struct{}

var _ encoding.Codec = rawCodec{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if raw, ok := v.(rawRequest); ok {
		return raw, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("otlpin: cannot encode %T", v)
	}
	return proto.Marshal(m)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch v := v.(type) {
	case *rawRequest:
		// gRPC hands a legacy codec a slice of its own (it materializes the
		// message's buffers into a new one), so it is kept without a copy.
		*v = data
		return nil
	case proto.Message:
		return proto.Unmarshal(data, v)
	}
	return fmt.Errorf("otlpin: cannot decode into %T", v)
}

// heldRequest is an export request as gRPC received it: its buffers,
// referenced until the request's decode is done (exportGRPC frees them).
type heldRequest struct{ data mem.BufferSlice }

// heldCodec is the server's codec: it keeps a heldRequest in gRPC's
// buffers (taking a reference) and encodes answers as protobuf.
type heldCodec struct{}

var _ encoding.CodecV2 = heldCodec{}

func (heldCodec) Name() string { return "proto" }

func (heldCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := rawCodec{}.Marshal(v)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (heldCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch v := v.(type) {
	case *heldRequest:
		data.Ref()
		v.data = data
		return nil
	case proto.Message:
		return proto.Unmarshal(data.Materialize(), v)
	}
	return fmt.Errorf("otlpin: cannot decode into %T", v)
}

var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			defer releaseStream(ctx) // after the buffers are freed, before the answer goes
			var in heldRequest
			if err := dec(&in); err != nil { // gRPC reads the message here
				if cause := context.Cause(ctx); errors.Is(cause, ErrBusy) {
					// Cut by its connection's pool: gRPC has answered
					// CANCELLED already; this counts it as busy.
					return nil, srv.(*Receiver).grpcBusy(cause, retrySlots)
				}
				return nil, err
			}
			defer in.data.Free()
			if err := streamReceived(ctx, int64(in.data.Len())); err != nil {
				return nil, srv.(*Receiver).grpcBusy(err, retrySlots)
			}
			return srv.(*Receiver).exportGRPC(ctx, in.data)
		},
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// grpcBusy counts a busy answer and makes it: UNAVAILABLE with a
// RetryInfo delay of retry.
func (r *Receiver) grpcBusy(err error, retry time.Duration) error {
	r.met.requests.WithLabelValues("grpc", reqBusy).Inc()
	st, _ := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	return st.Err()
}

// exportGRPC is TraceService/Export: partial success in the response,
// INVALID_ARGUMENT for a malformed request (not retried), UNAVAILABLE with
// a RetryInfo delay when the client should send it again later.
func (r *Receiver) exportGRPC(ctx context.Context, in mem.BufferSlice) (*coltracepb.ExportTraceServiceResponse, error) {
	if _, tapped := ctx.Value(tappedKey{}).(*tappedStream); r.cfg.auth != nil && !tapped {
		// The tap checks the credential of every stream it admits; this is
		// for a server made without GRPCServerOptions' tap.
		auth := ""
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get("authorization"); len(v) > 0 {
				auth = v[0]
			}
		}
		if !r.cfg.auth(auth) {
			r.met.requests.WithLabelValues("grpc", reqUnauthorized).Inc()
			return nil, status.Error(codes.Unauthenticated, errBadToken)
		}
	}
	var body []byte
	var err error
	size := int64(in.Len())
	if gzipped(ctx) {
		// Decompressed here, into memory its stream holds first.
		limit := expansionLimit(size, r.cfg.grpcMax)
		if st, _ := ctx.Value(tappedKey{}).(*tappedStream); st != nil {
			err = st.reserve(ctx, limit)
		} else if err = r.mem.takeWait(ctx, "", limit, reserveWait); err == nil {
			defer r.mem.give("", limit)
		}
		if err != nil {
			return nil, r.grpcBusy(err, retrySlots)
		}
		buf := r.msgBuf(0)
		defer r.putMsgBuf(buf, 0)
		z := []byte(nil)
		if len(in) == 1 {
			z = in[0].ReadOnlyData() // heldGzip's one slice
		} else {
			z = in.Materialize()
		}
		if err := gunzip(buf, z, limit, r.cfg.grpcMax); err != nil {
			r.met.requests.WithLabelValues("grpc", resultOf(Result{}, err)).Inc()
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		body, size = buf.Bytes(), int64(buf.Len())
	}
	done, retry, err := r.acquire(ctx, size)
	if err != nil {
		return nil, r.grpcBusy(err, retry)
	}
	defer done()
	if body == nil {
		buf := r.msgBuf(size)
		defer r.putMsgBuf(buf, size)
		body = buf.Bytes()[:in.CopyTo(buf.Bytes()[:size])]
	}
	res, err := r.Consume(body)
	r.met.requests.WithLabelValues("grpc", resultOf(res, err)).Inc()
	if err != nil {
		// Too large is INVALID_ARGUMENT too, not RESOURCE_EXHAUSTED (which
		// clients retry): the same request can never fit.
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	if res.Rejected > 0 {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: int64(res.Rejected), ErrorMessage: res.Message}
	}
	return resp, nil
}

// msgBuf is a buffer of at least size bytes for a gRPC message: from the
// pool of large messages when it is large (one is decoded at a time, so
// one buffer serves them all while they come), otherwise from bufPool.
// putMsgBuf gives it back.
func (r *Receiver) msgBuf(size int64) *bytes.Buffer {
	pool := &bufPool
	if size >= r.cfg.largeMsg {
		pool = &r.largeBufs
	}
	buf := pool.Get().(*bytes.Buffer)
	buf.Reset()
	buf.Grow(int(size))
	return buf
}

func (r *Receiver) putMsgBuf(buf *bytes.Buffer, size int64) {
	switch {
	case size >= r.cfg.largeMsg:
		r.largeBufs.Put(buf)
	case buf.Cap() <= 4<<20:
		bufPool.Put(buf)
	}
}
