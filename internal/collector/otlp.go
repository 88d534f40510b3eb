package collector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

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
	// stopping ends the refusals held back (a gRPC one holds its
	// connection's reader) when the receiver stops.
	stopping chan struct{}
	stopOnce sync.Once
}

// maxOTLPConns bounds the OTLP/gRPC connections served at once.
const maxOTLPConns = 64

func (s *Server) newOTLP() error {
	if err := checkOTLPExposure(&s.cfg); err != nil {
		return err
	}
	opts := []otlpin.Option{
		otlpin.WithClock(s.cfg.Now),
		otlpin.WithRegisterer(s.cfg.Registerer),
		otlpin.WithLogger(s.log),
		otlpin.WithRefusalHold(s.holdOTLPRefusal),
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
	s.otlp = &otlpState{recv: recv, stopping: make(chan struct{})}
	return nil
}

// checkOTLPExposure refuses an OTLP/gRPC listener off loopback while
// exports need no credential (as checkExposure does for --listen), unless
// Config.Insecure says so: the gRPC address is its own, so a loopback
// --listen does not make it safe.
func checkOTLPExposure(c *Config) error {
	if c.OTLPGRPC == "" || c.Insecure || isLoopback(c.OTLPGRPC) {
		return nil
	}
	var open []string
	if c.Token == "" {
		open = append(open, "anyone could export spans (set --token)")
	}
	if !c.TLS.Enabled() {
		open = append(open, "spans and the token would travel in clear (set --tls-cert and --tls-key)")
	}
	if len(open) == 0 {
		return nil
	}
	return fmt.Errorf("%w: --otlp-grpc %s is not loopback: %s; or pass --insecure to run open on purpose",
		ErrConfig, c.OTLPGRPC, strings.Join(open, ", "))
}

// holdOTLPRefusal holds back the answer to an OTLP request refused for
// what it is, sharing the report door's places (see holdRefusal): false
// when they are all taken (the answer goes at once).
func (s *Server) holdOTLPRefusal(ctx context.Context) bool {
	if s.cfg.RefusalDelay <= 0 {
		return true
	}
	select {
	case s.in.held <- struct{}{}:
	default:
		s.guard.refusalsUnheld.Inc()
		return false
	}
	defer func() { <-s.in.held }()
	s.guard.refusalsHeld.Inc()
	t := time.NewTimer(s.cfg.RefusalDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.life.doneChan():
	case <-s.otlp.stopping:
	}
	return true
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
	opts := s.otlp.recv.GRPCServerOptions()
	if s.life.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.life.tls)))
	}
	gs := grpc.NewServer(opts...)
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
	s.otlp.stopOnce.Do(func() { close(s.otlp.stopping) })
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
