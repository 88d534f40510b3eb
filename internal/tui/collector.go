package tui

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
)

// startHint says how to get a collector when none answers.
const startHint = "start one with `qtop demo` (a demo collector in this process) or `collector serve --demo`, or point --collector at yours"

// staleAfter is how long a stream may stay silent before it is taken for
// lost: a collector sends a snapshot a second, so a stream silent this
// long is a connection that died without a word (a half-open TCP
// connection, a stuck proxy) or a server that is not a collector. It is
// dropped and connected again, and the UI says so rather than showing the
// last snapshot as if it were live.
const staleAfter = 10 * time.Second

// Collector follows a collector's live stream (GET /v1/live/stream) and
// posts throttles to its policy (POST /v1/policy).
type Collector struct {
	base  string
	token string
	user  string
	opts  []api.ClientOption

	mu     sync.Mutex
	st     *stream
	closed bool
	wg     sync.WaitGroup
}

var (
	_ Source     = (*Collector)(nil)
	_ OnceSource = (*Collector)(nil)
)

// stream is one connection to the live stream, for one query.
type stream struct {
	q      Query
	snaps  chan api.Snapshot // the latest snapshot, if not yet taken
	errc   chan error        // the connection's end
	cancel context.CancelFunc
}

// NewCollector returns a source that reads the collector at base
// (http://host:port or host:port); token is the bearer token of policy
// changes (the collector's admin token, needed only to throttle; the
// read token of the live view is an option, api.WithToken).
func NewCollector(base, token string, opts ...api.ClientOption) (*Collector, error) {
	if _, err := api.NewClient(base, opts...); err != nil {
		return nil, fmt.Errorf("%w: --collector: %w", ErrInput, err)
	}
	return &Collector{base: base, token: token, opts: opts}, nil
}

func (c *Collector) client(q Query) *api.Client {
	opts := append([]api.ClientOption{api.WithMeasure(q.Measure), api.WithTop(q.Top)}, c.opts...)
	cl, _ := api.NewClient(c.base, opts...) // checked by NewCollector
	return cl
}

// Describe names the collector.
func (c *Collector) Describe() string { return "collector " + c.url() }

func (c *Collector) url() string {
	if !strings.Contains(c.base, "://") {
		return "http://" + c.base
	}
	return c.base
}

// Features: a collector takes throttles; it signals backends while it
// samples a PostgreSQL (FeaturesOf).
func (c *Collector) Features() Features { return Features{Throttle: true} }

// FeaturesOf: c and k go through the collector (POST /v1/pg/signal, the
// admin token) while its snapshot says it samples a PostgreSQL.
func (c *Collector) FeaturesOf(s *api.Snapshot) Features {
	return Features{Throttle: true, Signal: s.Collector.Sampler}
}

// CancelStatement cancels the statement shown, through the collector's
// own connection to PostgreSQL: only that statement, checked there.
func (c *Collector) CancelStatement(ctx context.Context, t pgactivity.Target, actor string) error {
	return c.signal(ctx, api.SignalCancel, t, actor)
}

// TerminateSession ends the session shown (and its transaction, when
// given), through the collector, as CancelStatement.
func (c *Collector) TerminateSession(ctx context.Context, t pgactivity.Target, actor string) error {
	return c.signal(ctx, api.SignalTerminate, t, actor)
}

func (c *Collector) signal(ctx context.Context, action string, t pgactivity.Target, actor string) error {
	sig := api.PGSignal{Action: action, PID: t.PID, QueryStart: t.QueryStart, BackendStart: t.BackendStart,
		XactStart: t.XactStart, Actor: actor}
	if len(sig.Actor) > api.MaxSignalActor {
		sig.Actor = sig.Actor[:api.MaxSignalActor]
	}
	err := c.client(Query{}).Signal(ctx, sig, c.token)
	if errors.Is(err, api.ErrMovedOn) {
		return fmt.Errorf("%w: %w", pgactivity.ErrMovedOn, err)
	}
	return err
}

// Next returns the next snapshot of the stream, connecting (again) when
// needed; a query unlike the stream's reconnects with it.
func (c *Collector) Next(ctx context.Context, q Query) (api.Snapshot, error) {
	st, err := c.stream(q)
	if err != nil {
		return api.Snapshot{}, err
	}
	stale := time.NewTimer(staleAfter)
	defer stale.Stop()
	select {
	case s := <-st.snaps:
		return s, nil
	case err := <-st.errc:
		c.drop(st)
		return api.Snapshot{}, c.explain(err)
	case <-stale.C:
		c.drop(st)
		return api.Snapshot{}, fmt.Errorf("%w: %s sent no snapshot for %s (a collector sends one a second): reconnecting; "+
			"if this lasts, check that --collector is a qtop collector and that nothing between holds the connection", ErrUnreachable, c.url(), staleAfter)
	case <-ctx.Done():
		return api.Snapshot{}, ctx.Err()
	}
}

// ReadTokenHint says what qtop reads a collector with, after a refusal of
// its token.
const ReadTokenHint = "qtop reads with --token or QTOP_TOKEN: the collector's read token (its --read-token), or its admin token"

// explain turns a connection error into one that says what to do.
func (c *Collector) explain(err error) error {
	switch {
	case errors.Is(err, ErrClosed):
		return err
	case errors.Is(err, api.ErrUnauthorized):
		return fmt.Errorf("collector %s: %w; %s", c.url(), err, ReadTokenHint)
	case errors.Is(err, api.ErrStatus), errors.Is(err, api.ErrProtocol), errors.Is(err, api.ErrClientCert):
		return fmt.Errorf("collector %s: %w", c.url(), err)
	}
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknownCA):
		return fmt.Errorf("%w: %s: %v; give qtop the CA that signed the collector's certificate: --ca-file FILE or QTOP_CA_FILE", ErrUnreachable, c.url(), err)
	case errors.As(err, &certInvalid) && certInvalid.Reason == x509.Expired:
		return fmt.Errorf("%w: %s: %v; the collector's certificate has expired (or this machine's clock is wrong): renew it, the collector serves a new --tls-cert file as soon as it changes", ErrUnreachable, c.url(), err)
	case errors.As(err, &badHost):
		return fmt.Errorf("%w: %s: %v; the collector's certificate does not fit this address: use the name or address it was issued for", ErrUnreachable, c.url(), err)
	case errors.As(err, &certInvalid):
		return fmt.Errorf("%w: %s: %v; the collector's certificate is not one a server can use: issue it for server authentication from the CA given with --ca-file", ErrUnreachable, c.url(), err)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("%w: no collector answers at %s (%v); %s", ErrUnreachable, c.url(), op.Err, startHint)
	}
	return fmt.Errorf("%w: %s: %v; %s", ErrUnreachable, c.url(), err, startHint)
}

// stream returns the running stream for q, starting one if there is none
// or it was for another query.
func (c *Collector) stream(q Query) (*stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.st != nil && c.st.q == q {
		return c.st, nil
	}
	if c.st != nil {
		c.st.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &stream{q: q, snaps: make(chan api.Snapshot, 1), errc: make(chan error, 1), cancel: cancel}
	c.st = st
	cl := c.client(q)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := cl.Stream(ctx, func(s api.Snapshot) {
			select { // keep only the latest: a slow UI skips snapshots, never lags
			case <-st.snaps:
			default:
			}
			st.snaps <- s
		})
		if ctx.Err() != nil {
			err = ErrClosed
		}
		st.errc <- err
	}()
	return st, nil
}

func (c *Collector) drop(st *stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.cancel()
	if c.st == st {
		c.st = nil
	}
}

// Throttle posts rule to the collector's policy.
func (c *Collector) Throttle(ctx context.Context, rule policy.Rule) error {
	if c.isClosed() {
		return ErrClosed
	}
	cl := c.client(Query{})
	if _, err := cl.PostPolicy(ctx, rule, c.token); err != nil {
		return c.adminErr(err)
	}
	return nil
}

// adminErr says, of a refused policy change, which credential it needs
// and where it lives.
func (c *Collector) adminErr(err error) error { return c.refused("the policy change", err) }

// refused says, of a refused change (what), which credential it needs and
// where it lives.
func (c *Collector) refused(what string, err error) error {
	if !errors.Is(err, api.ErrUnauthorized) {
		return c.explain(err)
	}
	had := "no admin token"
	if c.token != "" {
		had = "the token given"
	}
	return fmt.Errorf("%s refused %s with %s (%w). It needs the admin token (the collector's --admin-token, else its DATA_DIR/admin-token): "+
		"qtop --admin-token-file, --admin-token, QTOP_ADMIN_TOKEN or QTOP_ADMIN_TOKEN_FILE; --token only reads", c.url(), what, had, err)
}

// Cancel is not supported: a collector does not signal backends.
func (c *Collector) Cancel(context.Context, int32) error {
	return fmt.Errorf("%w: cancelling a backend needs qtop --postgres DSN", ErrUnsupported)
}

// Terminate is not supported: a collector does not signal backends.
func (c *Collector) Terminate(context.Context, int32) error {
	return fmt.Errorf("%w: terminating a backend needs qtop --postgres DSN", ErrUnsupported)
}

// Once returns one snapshot (GET /v1/live), for --once.
func (c *Collector) Once(ctx context.Context, q Query) (api.Snapshot, error) {
	s, err := c.client(q).Get(ctx)
	if err != nil {
		return api.Snapshot{}, c.explain(err)
	}
	return s, nil
}

func (c *Collector) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close ends the stream and waits for its goroutine.
func (c *Collector) Close() error {
	c.mu.Lock()
	c.closed = true
	if c.st != nil {
		c.st.cancel()
		c.st = nil
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
