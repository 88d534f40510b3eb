package otlpin

import (
	"context"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // OTLP/gRPC clients may compress with gzip
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// GRPCServerOptions are the options a gRPC server needs to serve the
// receiver (RegisterGRPC): a message limit of the decoded body limit (gRPC
// checks it after decompression too), and a codec that hands the export
// request to the receiver's wire walk as bytes instead of decoding it into
// messages.
func (r *Receiver) GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(r.cfg.maxDecoded)),
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxConcurrentStreams(uint32(4 * r.cfg.inflight)),
	}
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
		*v = append((*v)[:0], data...) // gRPC reuses data after the call
		return nil
	case proto.Message:
		return proto.Unmarshal(data, v)
	}
	return fmt.Errorf("otlpin: cannot decode into %T", v)
}

var traceServiceDesc = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in rawRequest
			if err := dec(&in); err != nil {
				return nil, err
			}
			return srv.(*Receiver).exportGRPC(ctx, in)
		},
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// exportGRPC is TraceService/Export: partial success in the response,
// INVALID_ARGUMENT for a malformed request (not retried), UNAVAILABLE with
// a RetryInfo delay when the client should send it again later.
func (r *Receiver) exportGRPC(ctx context.Context, in rawRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if r.cfg.auth != nil {
		auth := ""
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get("authorization"); len(v) > 0 {
				auth = v[0]
			}
		}
		if !r.cfg.auth(auth) {
			r.met.requests.WithLabelValues("grpc", reqUnauthorized).Inc()
			return nil, status.Error(codes.Unauthenticated, "missing or wrong bearer token")
		}
	}
	if retry, err := r.acquire(); err != nil {
		r.met.requests.WithLabelValues("grpc", reqBusy).Inc()
		st, _ := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
		return nil, st.Err()
	}
	defer r.release()
	res, err := r.Consume(in)
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
