package collector

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/qtop-dev/qtop/internal/otlpin"
	"github.com/qtop-dev/qtop/report"
)

// The OTLP receiver (package otlpin) turns spans into the same reports as
// qtop's own reporters and hands them to Consume in process: the write-ahead
// log, the duplicate filter, the per-source admission, validation and
// folding, the live view, the store and the metrics do not tell the two
// apart. otlpPart is its part of the server: the route in Handler, start
// in Run, listen in Start, stop first in Shutdown.
type otlpPart struct {
	recv *otlpin.Receiver
	grpc *grpc.Server
	ln   net.Listener
	// stopping ends the refusals held back (a gRPC one holds its
	// connection's reader) when the receiver stops.
	stopping chan struct{}
	stopOnce sync.Once
}

// newOTLPPart makes the receiver, which hands its reports to c; a refusal
// for what a request is is held back at the report door's places (in),
// exports take the credential of POST /v1/reports (checked by auth,
// Server.Authorize) and are refused, before they are read, while the data
// directory is below its reserve (disk), as reports are (an export
// answered 200 must reach the write-ahead log), and while the log is
// replayed (boot: OTLP/gRPC then answers Unavailable with a retry after
// replayRetry, and OTLP/HTTP 503 with Retry-After, both after the credential).
func newOTLPPart(cfg Config, c report.Consumer, in *intake, auth func(*http.Request, Role) (string, error), disk *diskGuard, boot *bootState) (*otlpPart, error) {
	if err := checkOTLPExposure(&cfg); err != nil {
		return nil, err
	}
	p := &otlpPart{stopping: make(chan struct{})}
	opts := []otlpin.Option{
		otlpin.WithClock(cfg.Now),
		otlpin.WithRegisterer(cfg.Registerer),
		otlpin.WithLogger(cfg.Logger),
		otlpin.WithRefusalHold(func(ctx context.Context) bool { return in.hold(ctx, p.stopping) }),
		// The windows the spans become are counted against the disk's
		// estimate when they are logged (Consume); the door only asks.
		otlpin.WithAdmission(func(int64) error {
			if boot.pending.Load() {
				return report.NewRetryable(errors.New(boot.status()), replayRetry)
			}
			return disk.admit(0)
		}),
		otlpin.WithGated(func(service string) bool { return in.gatedNow(service, cfg.Now()) }),
	}
	if cfg.OTLPTenantAttribute != "" {
		opts = append(opts, otlpin.WithTenantAttribute(cfg.OTLPTenantAttribute))
	}
	if cfg.OTLPMaxRows > 0 {
		opts = append(opts, otlpin.WithMaxRows(cfg.OTLPMaxRows))
	}
	if cfg.OTLPGRPCMaxBytes > 0 {
		opts = append(opts, otlpin.WithGRPCMaxMessage(cfg.OTLPGRPCMaxBytes))
	}
	if cfg.OTLPRUModel != nil {
		opts = append(opts, otlpin.WithCostModel(*cfg.OTLPRUModel))
	}
	if cfg.Token != "" {
		// The credential of POST /v1/reports, checked the same way.
		opts = append(opts, otlpin.WithAuth(func(header string) bool {
			_, err := auth(&http.Request{Header: http.Header{"Authorization": {header}}}, RoleReport)
			return err == nil
		}))
	}
	var err error
	if p.recv, err = otlpin.New(c, opts...); err != nil {
		return nil, fmt.Errorf("%w: otlp: %w", ErrConfig, err)
	}
	return p, nil
}

// checkOTLPExposure refuses an OTLP/gRPC listener off loopback while
// exports need no credential (as checkExposure does for --listen), unless
// Config.Insecure says so: the gRPC address is its own, so a loopback
// --listen does not make it safe.
func checkOTLPExposure(c *Config) error {
	if c.OTLPGRPC == "" {
		return nil
	}
	return checkGRPCExposure(c, "--otlp-grpc", c.OTLPGRPC, "anyone could export spans", "spans")
}

// checkGRPCExposure refuses a gRPC port (flag, at addr) off loopback
// while calls need no credential (open says what anyone could do) or
// travel in clear (what: what would), unless Config.Insecure says so.
func checkGRPCExposure(c *Config, flag, addr, open, what string) error {
	if c.Insecure || isLoopback(addr) {
		return nil
	}
	var why []string
	if c.Token == "" {
		why = append(why, open+" (set --token)")
	}
	if !c.TLS.Enabled() {
		why = append(why, what+" and the token would travel in clear (set --tls-cert and --tls-key)")
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s %s is not loopback: %s; or pass --insecure to run open on purpose",
		ErrConfig, flag, addr, strings.Join(why, ", "))
}

// listen serves OTLP/gRPC on addr, when set (from Start; over TLS with
// tlsCfg when not nil), on a goroutine of wg. Each connection may carry
// a few messages of up to the decoded limit at once; the number of
// connections is bounded too.
func (p *otlpPart) listen(addr string, maxConns int, e grpcEnv) error {
	if addr == "" {
		return nil
	}
	gs, ln, err := serveGRPC(grpcListener{name: "otlp grpc", label: "otlp", addr: addr, maxConns: maxConns,
		raise: "raise --otlp-grpc-max-conns (one connection per exporting process)",
		opts:  p.recv.GRPCServerOptions(), register: p.recv.RegisterGRPC,
		wrap: p.recv.GRPCListener, creds: otlpin.GRPCCredentials}, e)
	if err != nil {
		return err
	}
	p.grpc, p.ln = gs, ln
	return nil
}

// grpcListener is a gRPC service the collector serves on a port of its
// own: OTLP/gRPC, the rate-limit service.
type grpcListener struct {
	name     string // in errors and logs
	label    string // in the connection metrics
	addr     string
	maxConns int
	raise    string // what to do when a connection is refused for maxConns
	opts     []grpc.ServerOption
	register func(*grpc.Server)
	wrap     func(net.Listener) net.Listener // if not nil, around the capped listener
	// creds, if not nil, wraps the TLS credentials (above wrap's
	// connections: otlpin.GRPCCredentials)
	creds func(credentials.TransportCredentials) credentials.TransportCredentials
}

// grpcKeepalive: a connection without a call for 5 minutes is closed (its
// client reconnects for its next call), and one whose peer went silent
// (a host gone without closing) is found by a ping after 2 minutes
// without traffic and closed 20 s later, so neither keeps a slot of
// maxConns.
var grpcKeepalive = keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute, Time: 2 * time.Minute, Timeout: 20 * time.Second}

// grpcEnv is what the collector's gRPC listeners share: TLS (nil: none),
// the goroutines Shutdown waits for, the connection metrics, the log and
// the clock.
type grpcEnv struct {
	tls *tls.Config
	wg  *sync.WaitGroup
	m   *connMetrics
	log *slog.Logger
	now func() time.Time
}

// serveGRPC listens on l.addr (at most l.maxConns connections at once:
// capListener) and serves l's service there (over TLS with e.tls when
// not nil) on a goroutine of e.wg.
func serveGRPC(l grpcListener, e grpcEnv) (*grpc.Server, net.Listener, error) {
	tlsCfg, wg, m, log, now := e.tls, e.wg, e.m, e.log, e.now
	raw, err := net.Listen("tcp", l.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("collector: %s listen: %w", l.name, err)
	}
	var ln net.Listener = limitConns(raw, l.maxConns, l.label, l.name, l.raise, m, log, now)
	if l.wrap == nil {
		// The OTLP receiver's own wrap closes reset floods; here a guard
		// does.
		floods := m.floods.WithLabelValues(l.label)
		l.wrap = func(ln net.Listener) net.Listener {
			return otlpin.ResetGuard(ln, func(peer string) {
				floods.Inc()
				log.Warn(l.name+": connection closed: it resets most of the streams it opens", "peer", peer)
			})
		}
		l.creds = otlpin.ResetGuardCredentials
	}
	ln = l.wrap(ln)
	// An idle connection lends its write buffer back (SharedWriteBuffer).
	opts := append(slices.Clip(l.opts), grpc.KeepaliveParams(grpcKeepalive), grpc.SharedWriteBuffer(true))
	if tlsCfg != nil {
		creds := credentials.NewTLS(tlsCfg)
		if l.creds != nil {
			creds = l.creds(creds)
		}
		opts = append(opts, grpc.Creds(refusedCreds{creds, newTLSRefusals(l.label, l.name, m, log)}))
	}
	gs := grpc.NewServer(opts...)
	l.register(gs)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error(l.name+" server", "err", err)
		}
	}()
	log.Info(l.name+" listening", "addr", ln.Addr().String(), "tls", tlsCfg != nil)
	return gs, ln, nil
}

// OTLPGRPCAddr returns the address OTLP/gRPC listens on ("" when off).
func (s *Server) OTLPGRPCAddr() string {
	if s.otlp == nil || s.otlp.ln == nil {
		return ""
	}
	return s.otlp.ln.Addr().String()
}

// stop stops the gRPC server and the receiver, whose last windows are
// merged before the server closes (first thing in Shutdown).
func (p *otlpPart) stop(ctx context.Context, log *slog.Logger) {
	p.stopOnce.Do(func() { close(p.stopping) })
	if p.grpc != nil {
		done := make(chan struct{})
		go func() { p.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			p.grpc.Stop()
			<-done
		}
	}
	if err := p.recv.Shutdown(ctx); err != nil && !errors.Is(err, otlpin.ErrShutdown) {
		log.Warn("otlp receiver shutdown", "err", err)
	}
}
