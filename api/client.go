package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// Errors of the client; test with errors.Is.
var (
	// ErrStatus: the collector answered with an error status (not 2xx);
	// the error text carries the collector's message.
	ErrStatus = errors.New("api: the call failed")
	// ErrUnauthorized: the collector refused the token (401 or 403).
	ErrUnauthorized = errors.New("api: unauthorized")
	// ErrProtocol: the answer is not what the API promises (bad JSON, an
	// event too large), or not a collector's at all (a web page, another
	// API's JSON, no HTTP); the error text says what the server answered.
	ErrProtocol = errors.New("api: protocol error")
	// ErrNoAnswer: the server accepted the connection but did not answer
	// (silent until the deadline, or closed the connection): not a
	// collector, or an overloaded one. It is an ErrProtocol.
	ErrNoAnswer = fmt.Errorf("%w: no answer", ErrProtocol)
	// ErrClientCert: the collector requires a client certificate (mTLS)
	// and refused the one sent, or the lack of one.
	ErrClientCert = errors.New("api: client certificate refused")
)

// MaxEventBytes bounds one snapshot event or body read by the client.
const MaxEventBytes = 32 << 20

// Client reads the live API of one collector. Its zero value is not
// usable: call NewClient.
type Client struct {
	base    *url.URL
	http    *http.Client
	measure string
	top     int
	token   string
	scope   string
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithHTTPClient sets the HTTP client (default: one with no overall
// timeout, as the stream is long-lived; use contexts for deadlines).
func WithHTTPClient(h *http.Client) ClientOption { return func(c *Client) { c.http = h } }

// WithMeasure sets the measure that orders the tenants (MeasureRU …).
func WithMeasure(m string) ClientOption { return func(c *Client) { c.measure = m } }

// WithToken sends token as the bearer credential of reads (the
// collector's read token, or its admin token).
func WithToken(token string) ClientOption { return func(c *Client) { c.token = token } }

// authorize sets the read credential on req, if any.
func (c *Client) authorize(req *http.Request) {
	if c.token != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// WithTop sets how many tenants come before the "other" row.
func WithTop(n int) ClientOption { return func(c *Client) { c.top = n } }

// WithScope sets the scope query parameter: ScopeLocal asks a collector
// with peers for its own view only (default: the fleet's).
func WithScope(scope string) ClientOption { return func(c *Client) { c.scope = scope } }

// NewClient returns a client of the collector at base, e.g.
// "http://127.0.0.1:7070" (a bare host:port gets http://).
func NewClient(base string, opts ...ClientOption) (*Client, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("%w: collector address %q: want http://host:port", ErrProtocol, base)
	}
	c := &Client{base: u, http: &http.Client{}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

func (c *Client) url(path string, query bool) string {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	if query {
		q := url.Values{}
		if c.measure != "" {
			q.Set("by", c.measure)
		}
		if c.top > 0 {
			q.Set("n", strconv.Itoa(c.top))
		}
		if c.scope != "" {
			q.Set("scope", c.scope)
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Get returns the current snapshot.
func (c *Client) Get(ctx context.Context) (Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(PathLive, true), nil)
	if err != nil {
		return Snapshot{}, err
	}
	req.Header.Set("Accept", "application/json")
	c.authorize(req)
	var s Snapshot
	if err := c.call(req, "get", &s); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// call sends req and reads the collector's JSON answer into v. Every call
// of the client that reads JSON goes through it (and Stream through send,
// checkStatus and unmarshal), so that whatever else answers at the
// address is said as such (answer.go).
func (c *Client) call(req *http.Request, what string, v any) error {
	resp, err := c.send(req, what)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := checkStatus(resp); err != nil {
		return err
	}
	return readJSON(resp, v)
}

// Stream calls fn with every snapshot the collector sends, in order, until
// ctx ends (it then returns ctx.Err()) or the connection fails. It does not
// reconnect: the caller decides how to back off.
func (c *Client) Stream(ctx context.Context, fn func(Snapshot)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(PathStream, true), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req)
	resp, err := c.send(req, "stream")
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	defer resp.Body.Close()
	if err := checkStatus(resp); err != nil {
		return err
	}
	if err := checkEventStream(resp); err != nil {
		return err
	}
	err = ReadEvents(resp.Body, func(event string, data []byte) error {
		if event != "snapshot" {
			return nil
		}
		var s Snapshot
		if err := unmarshal(resp, data, &s); err != nil {
			return err
		}
		fn(s)
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		return fmt.Errorf("api: stream: %w", io.ErrUnexpectedEOF)
	}
	return err
}

// ReadEvents parses a server-sent event stream from r and calls fn with
// each event's name ("message" when it has none) and data (multi-line
// data joined with '\n'). It stops at the end of r, at the first error of
// fn, or at an event larger than MaxEventBytes (ErrProtocol).
func ReadEvents(r io.Reader, fn func(event string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEventBytes)
	var (
		event string
		data  []byte
		has   bool
	)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if has {
				name := event
				if name == "" {
					name = "message"
				}
				if err := fn(name, data); err != nil {
					return err
				}
			}
			event, data, has = "", data[:0], false
			continue
		}
		if line[0] == ':' {
			continue // comment (keep-alive)
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if has {
				data = append(data, '\n')
			}
			if len(data)+len(value) > MaxEventBytes {
				return fmt.Errorf("%w: event larger than %d bytes", ErrProtocol, MaxEventBytes)
			}
			data = append(data, value...)
			has = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, MaxEventBytes)
		}
		return fmt.Errorf("api: stream: %w", err)
	}
	return nil
}

// GetPolicy returns the collector's current policy (every rule, expired
// ones included until the collector prunes them).
func (c *Client) GetPolicy(ctx context.Context) (policy.Policy, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(PathPolicy, false), nil)
	if err != nil {
		return policy.Policy{}, err
	}
	return c.policyCall(req, "get policy")
}

// PostPolicy adds rule to the collector's policy, or replaces the rule with
// the same ID; a rule whose Expires has passed lifts it. token is the
// collector's bearer token. It returns the new policy.
func (c *Client) PostPolicy(ctx context.Context, rule policy.Rule, token string) (policy.Policy, error) {
	body, err := json.Marshal(rule)
	if err != nil {
		return policy.Policy{}, fmt.Errorf("api: post policy: %w", err)
	}
	if (rule.Action == policy.Throttle || rule.Action == policy.Quota) && rule.RUPerSecond == 0 {
		// A cap of 0 is meant: say so (the field is left out when 0, and
		// the collector refuses a cap that does not name its rate).
		body = append([]byte(`{"ru_per_second":0,`), body[1:]...)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(PathPolicy, false), bytes.NewReader(body))
	if err != nil {
		return policy.Policy{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.policyCall(req, "post policy")
}

// policyCall sends a request of the policy endpoint and decodes the policy
// it answers with.
func (c *Client) policyCall(req *http.Request, what string) (policy.Policy, error) {
	c.authorize(req)
	var p policy.Policy
	if err := c.call(req, what, &p); err != nil {
		return policy.Policy{}, err
	}
	return p, nil
}

// ErrorBody is the JSON body of every error the collector's HTTP API sends.
type ErrorBody struct {
	Error string `json:"error"`
	// RetryAfterSeconds is set on 429 and 503.
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
}

// AuditRow is one policy change, as GET /v1/audit returns it.
type AuditRow struct {
	Time          time.Time       `json:"time"`
	Who           string          `json:"who"`
	Action        string          `json:"action"`
	PolicyVersion uint64          `json:"policy_version"`
	Rule          json.RawMessage `json:"rule"`
}

// Audit returns the policy changes of [from, to), oldest first; it needs
// the collector's admin token.
func (c *Client) Audit(ctx context.Context, from, to time.Time, adminToken string) ([]AuditRow, error) {
	u := c.url(PathAudit, false)
	q := url.Values{}
	q.Set("from", from.UTC().Format(time.RFC3339Nano))
	q.Set("to", to.UTC().Format(time.RFC3339Nano))
	q.Set("limit", "10000") // the collector's most (its default is the newest 1,000)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	var rows []AuditRow
	if err := c.call(req, "audit", &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// History returns tenant's per-minute history over the last minutes
// (1…MaxHistoryMinutes) from the collector's store.
func (c *Client) History(ctx context.Context, tenant string, minutes int) (History, error) {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + PathHistory
	u.RawQuery = url.Values{"tenant": {tenant}, "minutes": {strconv.Itoa(minutes)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return History{}, err
	}
	c.authorize(req)
	var h History
	if err := c.call(req, "history", &h); err != nil {
		return History{}, err
	}
	return h, nil
}

// Autopilot returns the autopilot's state (GET PathAutopilot, the read
// credential).
func (c *Client) Autopilot(ctx context.Context) (AutopilotState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(PathAutopilot, false), nil)
	if err != nil {
		return AutopilotState{}, err
	}
	return c.autopilotCall(req, "autopilot")
}

// AutopilotCommand sends cmd (pause, resume, or cancel an action) to the
// collector's autopilot with its admin token and returns the state after
// it (with Forwarded set when the collector passed a cancel to the
// fleet's holder of the autopilot's lock, which ends the action). A refused token is ErrUnauthorized, saying that the admin token is
// needed; a command the collector does not take (none or two of its
// fields, an action that ended) is ErrStatus with the collector's reason.
func (c *Client) AutopilotCommand(ctx context.Context, cmd AutopilotCommand, adminToken string) (AutopilotState, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return AutopilotState{}, fmt.Errorf("api: autopilot command: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(PathAutopilot, false), bytes.NewReader(body))
	if err != nil {
		return AutopilotState{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	return c.autopilotCall(req, "autopilot command")
}

func (c *Client) autopilotCall(req *http.Request, what string) (AutopilotState, error) {
	c.authorize(req)
	var s AutopilotState
	if err := c.call(req, what, &s); err != nil {
		if req.Method == http.MethodPost && errors.Is(err, ErrUnauthorized) {
			return AutopilotState{}, fmt.Errorf("%w (the autopilot's commands need the collector's admin token)", err)
		}
		return AutopilotState{}, err
	}
	return s, nil
}
