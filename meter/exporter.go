package meter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
)

// Exporter sends a Reporter's reports. HTTP to the collector is the
// Reporter's own (NewReporter); ConsumerExporter hands reports to a
// report.Consumer in process, with no encoding (NewReporterTo).
//
// Export makes one attempt. It returns the collector's reply, or a
// report.RetryableError (the Reporter sends the same report again after
// its backoff, and at least the error's delay), or any other error, for
// good: the Reporter drops the report. It must not keep r.
type Exporter interface {
	Export(ctx context.Context, r *report.Report) (report.Reply, error)
}

// ConsumerExporter returns an Exporter that hands each report to c, in
// process (a collector in the same process, a test).
func ConsumerExporter(c report.Consumer) Exporter { return consumerExporter{c} }

type consumerExporter struct{ c report.Consumer }

func (e consumerExporter) Export(ctx context.Context, r *report.Report) (report.Reply, error) {
	return e.c.Consume(ctx, r, nil)
}

var _ Exporter = consumerExporter{}

// NewReporterTo returns a reporter that hands rec's windows to exp
// instead of POSTing them: each window is a report of its own (not
// encoded) until exp is done with it. The options are NewReporter's
// (those of the HTTP client and the collectors do not apply).
func NewReporterTo(exp Exporter, rec *Recorder, opts ...ReporterOption) (*Reporter, error) {
	if exp == nil {
		return nil, fmt.Errorf("%w: nil Exporter", ErrInvalid)
	}
	r, err := NewReporter("http://in-process.invalid/", rec, opts...)
	if err != nil {
		return nil, err
	}
	r.exp = exp
	return r, nil
}

type sendResult struct {
	ok, retry  bool
	paced      bool // retry after retryAfter, as pacing (a 429 with a delay)
	retryAfter time.Duration
}

// export makes one attempt to send p, through the exporter or over HTTP,
// and applies the reply.
func (r *Reporter) export(ctx context.Context, p pending) sendResult {
	var reply report.Reply
	var err error
	if r.exp != nil {
		reply, err = r.exp.Export(ctx, p.rep)
	} else {
		reply, err = r.post(ctx, p.body, r.cfg.clock().Sub(p.cut))
	}
	if delay, retry := report.IsRetryable(err); retry {
		if r.exp != nil {
			r.failed("exporter")
		}
		var p pacing
		if errors.As(err, &p) {
			r.log.paced(r.cfg.clock(), err)
			return sendResult{retry: true, paced: true, retryAfter: delay}
		}
		r.log.failed(r.cfg.clock(), err, false)
		return sendResult{retry: true, retryAfter: delay}
	}
	var derr error
	if errors.Is(err, errReply) {
		derr, err = err, nil // merged; its reply is lost
	}
	if err != nil {
		if r.exp != nil {
			r.failed("rejected")
		}
		r.log.failed(r.cfg.clock(), err, true)
		return sendResult{}
	}
	r.log.sent(r.cfg.clock())
	pol, tag, verdicts, perr := replyParts(reply)
	if derr == nil {
		derr = perr
	}
	if derr != nil {
		if r.m != nil {
			r.m.replyErrors.Inc()
		}
		r.log.unreadable(r.cfg.clock(), derr)
	}
	if derr == nil {
		if len(reply.PolicyView) > 0 {
			r.applyView(pol, tag)
		} else {
			r.applyPolicy(pol)
		}
		if r.cfg.quota != nil {
			r.cfg.quota.Apply(r.cfg.clock(), verdicts)
		}
	}
	if r.m != nil {
		r.m.sent.Inc()
		r.m.bytes.Add(float64(len(p.body)))
	}
	return sendResult{ok: true}
}

// errReply is a 2xx whose reply could not be read: the report was
// merged, its reply is lost.
var errReply = errors.New("meter: unreadable reply")

// post makes one attempt to POST body: the reply of a 2xx, a
// report.RetryableError for a network error, a timeout, 401, 403, 408,
// 425, 429 or 5xx (with the reply's or the Retry-After's delay), a
// permanent error for any other status.
func (r *Reporter) post(ctx context.Context, body []byte, age time.Duration) (report.Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	target := r.target()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil { // the URL was checked by NewReporter
		return report.Reply{}, err
	}
	req.Header.Set("Content-Type", report.ContentType)
	req.Header.Set("Accept", report.ReplyContentType)
	req.Header.Set(report.AgeHeader, strconv.FormatInt(max(age, 0).Milliseconds(), 10))
	if tok := r.cfg.token.get(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		reason := "network"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "timeout"
		}
		r.failed(reason)
		if r.bg.ctx.Err() == nil && (ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded)) {
			r.failover(target)
		}
		return report.Reply{}, report.NewRetryable(err, 0)
	}
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, report.MaxReplyBytes+1))
	_ = resp.Body.Close()
	var reply report.Reply
	derr := rerr
	if derr == nil {
		reply, derr = report.DecodeReply(data)
	}
	// The reply's delay is exact; the header's is rounded up to whole
	// seconds (a 100 ms pacing became 1 s), so it serves only without one.
	retryAfter := reply.RetryAfter
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 && retryAfter <= 0 {
		retryAfter = time.Duration(s) * time.Second
	}
	code := resp.StatusCode
	msg := trimRetryAfter(reply.Message)
	if msg == "" && derr != nil {
		msg = bodyText(data) // not a reply: a proxy's page, Go's TLS server answering plain HTTP, …
	}
	refused := fmt.Errorf("meter: collector %s answered %d: %s", target, code, msg)
	switch {
	case code >= 200 && code < 300:
		if derr != nil {
			return report.Reply{Accepted: true}, fmt.Errorf("%w: %w", errReply, derr)
		}
		return reply, nil
	case code == http.StatusTooManyRequests && retryAfter > 0:
		r.failed("throttled")
		return report.Reply{}, report.NewRetryable(pacing{refused}, retryAfter)
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests:
		r.failed("throttled")
		return report.Reply{}, report.NewRetryable(refused, retryAfter)
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		// The token, not the report: it is kept until a token the
		// collector takes (a rotation reaching this process) sends it.
		r.failed("unauthorized")
		return report.Reply{}, report.NewRetryable(refused, retryAfter)
	case code >= 500:
		r.failed("server")
		r.failover(target)
		return report.Reply{}, report.NewRetryable(refused, retryAfter)
	default:
		r.failed("rejected")
		return report.Reply{}, report.NewPermanent(refused)
	}
}

// pacing is a 429 with a delay: the collector's per-source rate limit
// spacing out a backlog, not a failure to tell anyone about.
type pacing struct{ error }

func (p pacing) Unwrap() error { return p.error }

// trimRetryAfter drops the "(retry after …)" a collector's message ends
// with: the reporter's error says the delay it waits itself.
func trimRetryAfter(msg string) string {
	if i := strings.LastIndex(msg, " (retry after "); i >= 0 && strings.HasSuffix(msg, ")") {
		return msg[:i]
	}
	return msg
}

// replyParts decodes the policy and the quota verdicts of a reply. A
// policy that does not pass policy.ValidateContent is report.ErrMalformed: the
// reporter keeps the policy it had rather than apply half of a bad one.
func replyParts(reply report.Reply) (pol *policy.Policy, viewTag string, verdicts []quota.Verdict, err error) {
	if len(reply.PolicyView) > 0 {
		if pol, viewTag, err = viewPolicy(reply.PolicyView); err != nil {
			return nil, "", nil, err
		}
	} else if len(reply.Policy) > 0 {
		pol = new(policy.Policy)
		if err := json.Unmarshal(reply.Policy, pol); err != nil {
			return nil, "", nil, fmt.Errorf("%w: reply policy: %v", report.ErrMalformed, err)
		}
	}
	if pol != nil {
		pol.Upgrade() // from a collector of an older release: its looser checks
		if err := pol.ValidateContent(); err != nil {
			return nil, "", nil, fmt.Errorf("%w: reply policy: %w", report.ErrMalformed, err)
		}
	}
	if verdicts, err = quota.UnmarshalVerdicts(reply.Quotas); err != nil {
		return nil, "", nil, err
	}
	return pol, viewTag, verdicts, nil
}

// decodeReply decodes a reply body with its policy and quota verdicts.
func decodeReply(b []byte) (report.Reply, *policy.Policy, []quota.Verdict, error) {
	reply, err := report.DecodeReply(b)
	if err != nil {
		return reply, nil, nil, err
	}
	pol, _, verdicts, err := replyParts(reply)
	return reply, pol, verdicts, err
}

// bodyText is the start of a body that is not a reply, printable, for an
// error message.
func bodyText(b []byte) string {
	const most = 200
	t := strings.Map(func(r rune) rune {
		if r < ' ' || r == utf8.RuneError || r == 0x7f {
			return ' '
		}
		return r
	}, string(b[:min(len(b), most)]))
	t = strings.Join(strings.Fields(t), " ")
	if len(b) > most {
		t += " …"
	}
	return t
}
