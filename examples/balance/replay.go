package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/internal/enforcesim"
	"github.com/qtop-dev/qtop/policy"
)

// Mode is how the freshness rules run in a replay.
type Mode string

// The modes of a replay.
const (
	ModeOff      Mode = "no rules"
	ModeShadow   Mode = "shadow"
	ModeEnforced Mode = "enforced"
)

// ReplayConfig is a replay of the freshness model's trace through the
// real service over loopback HTTP.
type ReplayConfig struct {
	// Model is the calibrated model (sim.FreshnessResult.Config).
	Model enforcesim.FreshnessConfig
	// Users replayed and Span of trace time replayed after the first day
	// (which only gives the clients their copies, without HTTP).
	Users int
	Span  time.Duration
	// Rate is the requests sent per second of wall time (the trace's
	// hours are compressed into a herd); Slots and Work size the backend.
	Rate  float64
	Slots int
	Work  time.Duration
}

// DefaultReplay replays 400 users over 4 hours of trace at 600 requests
// a second against a backend of 4 × 10 ms (400 reads a second): 1.5 times
// its capacity.
func DefaultReplay(model enforcesim.FreshnessConfig) ReplayConfig {
	return ReplayConfig{Model: model, Users: 400, Span: 4 * time.Hour, Rate: 600, Slots: 4, Work: 10 * time.Millisecond}
}

// ReplayResult is one mode's run.
type ReplayResult struct {
	Mode        Mode
	Requests    int
	Answered    int    // 200 and 304
	Reads       uint64 // backend reads (handler runs)
	Shed        uint64 // 304s served by rules, no backend read
	Revalidated uint64 // 304s after a read, the copy being unchanged
	Refused     int    // 503s (CoDel, shedding)
	// Right and Wrong are the shadow verdicts; Precision their ratio.
	// The latencies are of the interactive GETs answered (200 or 304).
	Right, Wrong   uint64
	Precision      float64
	InteractiveP50 time.Duration
	InteractiveP95 time.Duration
	Elapsed        time.Duration
}

// vclock is the trace's time as the freshness middleware sees it.
type vclock struct{ ns atomic.Int64 }

func (c *vclock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

var traceEpoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func accountID(u int32) string { return "u" + strconv.Itoa(int(u)) }

// balanceAt is user u's balance after v changes.
func balanceAt(u int32, v int) int64 { return 10_000 + int64(u) + 137*int64(v) }

// Replay runs the trace once in mode.
func Replay(ctx context.Context, c ReplayConfig, mode Mode) (ReplayResult, error) {
	if c.Users < 1 || c.Span <= 0 || c.Rate <= 0 {
		return ReplayResult{}, fmt.Errorf("%w: replay users %d, span %v, rate %v", ErrConfig, c.Users, c.Span, c.Rate)
	}
	clk := &vclock{}
	app, err := New(Config{Slots: c.Slots, Work: c.Work, Rules: replayRules(mode), Clock: clk.Now})
	if err != nil {
		return ReplayResult{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ReplayResult{}, err
	}
	srv := &http.Server{Handler: app.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		app.Shutdown(sctx)
	}()

	tr := c.Model.Trace(c.Users, 24*time.Hour+c.Span)
	etags, version, first := warmUp(app, tr)
	app.Freshness().Drain()
	reads0 := app.Reads()

	cl := &replayClients{base: "http://" + ln.Addr().String(), etags: etags,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}, Timeout: 30 * time.Second}}
	defer cl.client.CloseIdleConnections()
	chans := cl.start(ctx, len(etags))
	start := time.Now()
	n := 0
	for _, q := range tr.Requests[first:] {
		if ctx.Err() != nil {
			break
		}
		// Data changes up to this request's time.
		if v := tr.Version(q.User, q.At); v != version[q.User] {
			version[q.User] = v
			app.ledger.mu.Lock()
			app.ledger.m[accountID(q.User)] = balanceAt(q.User, v)
			app.ledger.mu.Unlock()
		}
		if ns := traceEpoch.Add(q.At).UnixNano(); ns > clk.ns.Load() {
			clk.ns.Store(ns)
		}
		if wait := time.Until(start.Add(time.Duration(float64(n) / c.Rate * float64(time.Second)))); wait > 0 {
			time.Sleep(wait)
		}
		chans[q.User] <- q
		n++
	}
	for _, ch := range chans {
		close(ch)
	}
	cl.wg.Wait()
	res := ReplayResult{Mode: mode, Requests: n, Answered: cl.answered, Reads: app.Reads() - reads0, Refused: cl.refused, Elapsed: time.Since(start)}
	if cl.firstErr != nil {
		return res, fmt.Errorf("balance: replay: %w", cl.firstErr)
	}
	w := app.Freshness().Drain()
	res.fill(&w, cl.lat)
	return res, ctx.Err()
}

// replayRules is the Monzo rules as mode runs them.
func replayRules(mode Mode) policy.Freshness {
	rules := policy.Freshness{Rules: policy.MonzoRules()}
	switch mode {
	case ModeShadow:
		rules.Batch = len(rules.Rules)
		for i := range rules.Rules {
			rules.Rules[i].Shadow = true
		}
	case ModeEnforced:
		rules.Batch = len(rules.Rules)
	}
	return rules
}

// warmUp sets the balances as of the end of the trace's first day and
// returns, per user, the ETag of the client's last GET of that day
// (signed as the service would have signed it), the data version, and
// the index of the first request after the day.
func warmUp(app *App, tr enforcesim.Trace) (etags []string, version []int, first int) {
	users := len(tr.Changes)
	etags, version = make([]string, users), make([]int, users)
	last := make([]time.Duration, users)
	for i := range last {
		last[i] = -1
	}
	first = len(tr.Requests)
	for i, q := range tr.Requests {
		if q.At >= 24*time.Hour {
			first = i
			break
		}
		last[q.User] = q.At
	}
	for u := range int32(users) {
		v := tr.Version(u, 24*time.Hour)
		version[u] = v
		app.ledger.m[accountID(u)] = balanceAt(u, v)
		if last[u] >= 0 {
			id := accountID(u)
			body := balanceBody(id, balanceAt(u, tr.Version(u, last[u])))
			etags[u] = app.signer.Sign("/accounts/"+id+"/balance", freshness.ResponseHash(body), traceEpoch.Add(last[u]))
		}
	}
	return etags, version, first
}

// replayClients is one client per user, each sending its user's
// requests in order, and what they were answered.
type replayClients struct {
	base   string
	client *http.Client
	etags  []string
	wg     sync.WaitGroup

	mu                      sync.Mutex
	lat                     []time.Duration // interactive requests
	refused, answered, sent int
	firstErr                error
}

// start starts a client per user and returns their queues.
func (cl *replayClients) start(ctx context.Context, users int) []chan enforcesim.TraceRequest {
	chans := make([]chan enforcesim.TraceRequest, users)
	for u := range chans {
		chans[u] = make(chan enforcesim.TraceRequest, 256)
		cl.wg.Add(1)
		go func() {
			defer cl.wg.Done()
			for q := range chans[u] {
				code, etag, d, err := get(ctx, cl.client, cl.base, q, cl.etags[u])
				cl.answer(ctx, u, q, code, etag, d, err)
			}
		}()
	}
	return chans
}

func (cl *replayClients) answer(ctx context.Context, u int, q enforcesim.TraceRequest, code int, etag string, d time.Duration, err error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.sent++
	switch {
	case err != nil:
		if cl.firstErr == nil && ctx.Err() == nil {
			cl.firstErr = err
		}
	case code == http.StatusOK || code == http.StatusNotModified:
		if etag != "" {
			cl.etags[u] = etag
		}
		cl.answered++
		if q.Cause == policy.CauseInteractive {
			cl.lat = append(cl.lat, d)
		}
	case code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests:
		cl.refused++
	}
}

// fill adds the freshness figures of w and the interactive latencies.
func (res *ReplayResult) fill(w *freshness.Window, lat []time.Duration) {
	for _, r := range w.Routes {
		res.Revalidated += r.Revalidated
	}
	for _, r := range w.Rules {
		res.Shed += r.Served
		res.Right += r.Right
		res.Wrong += r.Wrong
	}
	if res.Right+res.Wrong > 0 {
		res.Precision = float64(res.Right) / float64(res.Right+res.Wrong)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		res.InteractiveP50 = lat[len(lat)/2]
		res.InteractiveP95 = lat[min(len(lat)-1, len(lat)*95/100)]
	}
}

// get sends one GET of the trace and returns the status, the ETag of the
// answer and the latency.
func get(ctx context.Context, c *http.Client, base string, q enforcesim.TraceRequest, etag string) (int, string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/accounts/"+accountID(q.User)+"/balance", nil)
	if err != nil {
		return 0, "", 0, err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	req.Header.Set(freshness.HeaderCause, string(q.Cause))
	if q.AppAge >= 0 {
		req.Header.Set(freshness.HeaderAppAge, strconv.FormatFloat(q.AppAge.Seconds(), 'f', 3, 64))
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("ETag"), time.Since(t0), nil
}

// WriteReplay writes the replay table.
func WriteReplay(w io.Writer, rows []ReplayResult) {
	fmt.Fprintln(w, "| rules | GETs | answered | backend reads | 304 by rules (reads avoided) | 304 revalidated | 503 | shadow precision | interactive p50 / p95 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		prec := "-"
		if r.Right+r.Wrong > 0 {
			prec = fmt.Sprintf("%.1f%% (%d of %d)", 100*r.Precision, r.Right, r.Right+r.Wrong)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %s | %s / %s |\n", r.Mode, r.Requests, r.Answered, r.Reads, r.Shed, r.Revalidated,
			r.Refused, prec, r.InteractiveP50.Round(100*time.Microsecond), r.InteractiveP95.Round(100*time.Microsecond))
	}
}
