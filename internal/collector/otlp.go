package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"

	"github.com/qtop-dev/qtop/internal/otlpin"
)

// The OTLP receiver (package otlpin) turns spans into the same reports as
// qtop's own reporters and hands them to Consume in process: the write-ahead
// log, the duplicate filter, the per-source admission, validation and
// folding, the live view, the store and the metrics do not tell the two
// apart. Its hooks in the server: the route in Handler, startOTLP in Run,
// listenOTLP in Start, stopOTLP first in Shutdown.
type otlpState struct {
	recv *otlpin.Receiver
	grpc *grpc.Server
	ln   net.Listener
}

// maxOTLPConns bounds the OTLP/gRPC connections served at once.
const maxOTLPConns = 64

func (s *Server) newOTLP() error {
	opts := []otlpin.Option{
		otlpin.WithClock(s.cfg.Now),
		otlpin.WithRegisterer(s.cfg.Registerer),
		otlpin.WithLogger(s.log),
	}
	if s.cfg.OTLPTenantAttribute != "" {
		opts = append(opts, otlpin.WithTenantAttribute(s.cfg.OTLPTenantAttribute))
	}
	if s.cfg.Token != "" {
		// The credential of POST /v1/reports, checked the same way.
		opts = append(opts, otlpin.WithAuth(func(auth string) bool {
			_, err := s.Authorize(&http.Request{Header: http.Header{"Authorization": {auth}}}, RoleReport)
			return err == nil
		}))
	}
	recv, err := otlpin.New(s, opts...)
	if err != nil {
		return fmt.Errorf("%w: otlp: %w", ErrConfig, err)
	}
	s.otlp = &otlpState{recv: recv}
	return nil
}

// startOTLP starts the receiver's flush loop (from Run).
func (s *Server) startOTLP() { s.otlp.recv.Start() }

// listenOTLP serves OTLP/gRPC on Config.OTLPGRPC, when set (from Start).
func (s *Server) listenOTLP() error {
	if s.cfg.OTLPGRPC == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.OTLPGRPC)
	if err != nil {
		return fmt.Errorf("collector: otlp grpc listen: %w", err)
	}
	// Each connection may carry a few messages of up to the decoded limit
	// at once; the number of connections is bounded too.
	ln = netutil.LimitListener(ln, maxOTLPConns)
	gs := grpc.NewServer(s.otlp.recv.GRPCServerOptions()...)
	s.otlp.recv.RegisterGRPC(gs)
	s.otlp.grpc, s.otlp.ln = gs, ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("otlp grpc server", "err", err)
		}
	}()
	s.log.Info("otlp grpc listening", "addr", ln.Addr().String())
	return nil
}

// OTLPGRPCAddr returns the address OTLP/gRPC listens on ("" when off).
func (s *Server) OTLPGRPCAddr() string {
	if s.otlp == nil || s.otlp.ln == nil {
		return ""
	}
	return s.otlp.ln.Addr().String()
}

// stopOTLP stops the gRPC server and the receiver, whose last windows are
// merged before the server closes (first thing in Shutdown).
func (s *Server) stopOTLP(ctx context.Context) {
	if s.otlp.grpc != nil {
		done := make(chan struct{})
		go func() { s.otlp.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			s.otlp.grpc.Stop()
			<-done
		}
	}
	if err := s.otlp.recv.Shutdown(ctx); err != nil && !errors.Is(err, otlpin.ErrShutdown) {
		s.log.Warn("otlp receiver shutdown", "err", err)
	}
}
