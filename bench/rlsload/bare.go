package main

import (
	"context"
	"flag"
	"fmt"
	"net"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// bareServer is the floor under the collector's answer: a gRPC server
// with go-control-plane's service that answers OK to every descriptor at
// once, with no credential, policy or bucket. What a call to it costs is
// what gRPC, HTTP/2 and protobuf cost on this machine before qtop does
// anything.
type bareServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (bareServer) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	st := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors()))
	for i := range st {
		st[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: st}, nil
}

// bare serves bareServer until killed:
//
//	rlsload bare -listen 127.0.0.1:18082 &
//	rlsload -addr 127.0.0.1:18082 -pid $!
func bare(args []string) error {
	fs := flag.NewFlagSet("bare", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:18082", "address")
	fs.Parse(args)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, bareServer{})
	fmt.Println("rlsload bare: serving on", ln.Addr())
	return srv.Serve(ln)
}
