package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// expiring is a context whose deadline the test decides: expire ends it
// with context.DeadlineExceeded, as its timer would, at a moment the test
// chooses (after the server has the request) rather than on the clock.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (e *expiring) expire() { e.once.Do(func() { close(e.done) }) }

// calls are every call of the client that reads an answer, by name.
func calls() map[string]func(context.Context, *Client) error {
	rule := policy.Rule{ID: "r1", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 5, Expires: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	return map[string]func(context.Context, *Client) error{
		"Get":        func(ctx context.Context, c *Client) error { _, err := c.Get(ctx); return err },
		"GetPolicy":  func(ctx context.Context, c *Client) error { _, err := c.GetPolicy(ctx); return err },
		"PostPolicy": func(ctx context.Context, c *Client) error { _, err := c.PostPolicy(ctx, rule, "admin"); return err },
		"PostFreshness": func(ctx context.Context, c *Client) error {
			_, err := c.PostFreshness(ctx, policy.Freshness{}, "admin")
			return err
		},
		"GetFreshness": func(ctx context.Context, c *Client) error { _, err := c.GetFreshness(ctx); return err },
		"History":      func(ctx context.Context, c *Client) error { _, err := c.History(ctx, "bigcorp", 5); return err },
		"Autopilot":    func(ctx context.Context, c *Client) error { _, err := c.Autopilot(ctx); return err },
		"AutopilotCommand": func(ctx context.Context, c *Client) error {
			_, err := c.AutopilotCommand(ctx, AutopilotCommand{Pause: true}, "admin")
			return err
		},
		"Audit": func(ctx context.Context, c *Client) error {
			_, err := c.Audit(ctx, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "admin")
			return err
		},
		"Signal": func(ctx context.Context, c *Client) error {
			return c.Signal(ctx, PGSignal{Action: SignalCancel, PID: 7, QueryStart: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, "admin")
		},
	}
}

// TestSilentServerIsNoAnswer: a server that accepts the connection and
// the request but never answers is said as such when the deadline comes
// (ErrNoAnswer, an ErrProtocol: not a collector, or an overloaded one),
// on every call, not as a failure to connect.
func TestSilentServerIsNoAnswer(t *testing.T) {
	release := make(chan struct{})
	var (
		mu  sync.Mutex
		ctx *expiring
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ctx.expire() // the request is here: the client's deadline passes
		mu.Unlock()
		<-release // silent until the test ends
	}))
	defer srv.Close()
	defer close(release)
	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range calls() {
		mu.Lock()
		ctx = newExpiring()
		mu.Unlock()
		err := call(ctx, c)
		if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v; want ErrNoAnswer", name, err)
			continue
		}
		for _, want := range []string{"the server at " + host + " accepted the connection but did not answer", "within",
			"may not be a qtop collector", "overloaded", "check that " + host + " is the collector's address and port", "7070"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", name, err, want)
			}
		}
	}
}

// TestCancelIsNotNoAnswer: a caller that gives up is not told that the
// server did not answer.
func TestCancelIsNotNoAnswer(t *testing.T) {
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c, _ := NewClient(srv.URL)
	if _, err := c.Get(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v; want context.Canceled only", err)
	}
}

// TestHangUpAndNotHTTP: a server that accepts and closes the connection,
// or answers in another protocol, is said as such, its bytes printable.
func TestHangUpAndNotHTTP(t *testing.T) {
	for _, c := range []struct {
		name, reply string
		is          error
		want        string
	}{
		{"hang up", "", ErrNoAnswer, "accepted the connection but closed it without answering GET /v1/live"},
		{"ssh", "SSH-2.0-OpenSSH_9.6\x1b[2J\r\n", ErrProtocol, "answered GET /v1/live with something that is not HTTP"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			buf.WriteString(c.reply)
			buf.Flush()
			conn.Close()
		}))
		cl, _ := NewClient(srv.URL)
		_, err := cl.Get(context.Background())
		srv.Close()
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) || strings.ContainsFunc(err.Error(), Unprintable) {
			t.Errorf("%s: %q; want %v and %q", c.name, err, c.is, c.want)
		}
	}
}

// TestNotACollectorAnswers: whatever else answers at the address — a web
// page, a 404 or 401 of another server, an empty body, JSON of another
// shape or none at all — is said as what it is, with the status and
// content type and a hint, on every call that reads an answer; the
// server's text printable and bounded.
func TestNotACollectorAnswers(t *testing.T) {
	page := func(status int, ct, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	long := "<html><head><title>Welcome\x1b[2J to\u202e nginx!" + strings.Repeat(" and more", 500) + "</title></head></html>"
	cases := []struct {
		name    string
		h       http.HandlerFunc
		is      error
		want    []string
		jsonOK  bool // a body that decodes into some of the calls' types
		skipFor string
	}{
		{name: "web page", h: page(200, "text/html; charset=utf-8", "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>hi</body></html>"),
			is: ErrProtocol, want: []string{`with 200 OK and text/html ("Welcome to nginx!"), not a qtop collector's JSON`, "7070"}},
		{name: "long hostile title", h: page(200, "text/html", long), is: ErrProtocol, want: []string{`text/html ("Welcome [2J to nginx! and more`, `…")`}},
		{name: "404 page", h: page(404, "text/html", "<html><title>404 Not Found</title></html>"),
			is: ErrStatus, want: []string{`with 404 Not Found and text/html ("404 Not Found"), not a qtop collector's JSON`}},
		{name: "404 of net/http", h: http.NotFound, is: ErrStatus, want: []string{`404 Not Found and text/plain ("404 page not found")`, "a collector older than this client, without"}},
		{name: "401 of a proxy", h: page(401, "text/html", "<html><title>401 Authorization Required</title></html>"),
			is: ErrUnauthorized, want: []string{"401 Unauthorized and text/html", "a proxy", "its own credentials"}},
		{name: "403", h: page(403, "text/plain", "forbidden\n"), is: ErrUnauthorized, want: []string{`403 Forbidden and text/plain ("forbidden")`}},
		{name: "502", h: page(502, "text/html", "<html><title>502 Bad Gateway</title></html>"), is: ErrStatus, want: []string{"cannot reach it"}},
		{name: "empty", h: page(200, "application/json", ""), is: ErrProtocol, want: []string{"with 200 OK and an empty body, not a qtop collector's JSON"}},
		{name: "array", h: page(200, "application/json", "[1,2,3]"), is: ErrProtocol, want: []string{"with JSON of another shape (json: cannot unmarshal", "another version"}},
		{name: "other JSON", h: page(200, "application/json", `{"hello":"world","ok":true}`), is: ErrProtocol,
			want: []string{"with JSON of another shape ("}},
		{name: "null", h: page(200, "application/json", "null"), is: ErrProtocol, want: []string{"with JSON of another shape (null where"}, skipFor: "Audit"},
		{name: "broken JSON", h: page(200, "application/json", `{"time":`), is: ErrProtocol, want: []string{"with JSON that does not parse ("}},
	}
	for _, tc := range cases {
		srv := httptest.NewServer(tc.h)
		host := strings.TrimPrefix(srv.URL, "http://")
		c, _ := NewClient(srv.URL)
		for name, call := range calls() {
			if name == tc.skipFor || name == "Signal" && tc.is == ErrProtocol {
				continue // a list may be null; a signal reads no answer
			}
			err := call(context.Background(), c)
			if !errors.Is(err, tc.is) {
				t.Errorf("%s, %s: %v; want %v", tc.name, name, err, tc.is)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, "the server at "+host+" answered ") {
				t.Errorf("%s, %s: %q does not name the server", tc.name, name, msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s, %s: %q lacks %q", tc.name, name, msg, w)
				}
			}
			if strings.ContainsFunc(msg, Unprintable) || len(msg) > 1000 || strings.Contains(msg, "<") {
				t.Errorf("%s, %s: not printable, too long or quoting markup: %q", tc.name, name, msg)
			}
		}
		srv.Close()
	}
}

// TestStreamOfAnotherServer: a stream answered with a web page is not
// taken for an event stream that ended.
func TestStreamOfAnotherServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><title>It works!</title></html>")
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	err := c.Stream(context.Background(), func(Snapshot) { t.Error("a snapshot from a web page") })
	want := `answered GET ` + PathStream + ` with 200 OK and text/html ("It works!"), not a qtop collector's event stream`
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want ErrProtocol and %q", err, want)
	}
}

// TestCollectorErrorsStayTheCollectors: a collector's own JSON error is
// quoted as it was, printable.
func TestCollectorErrorsStayTheCollectors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"collector: unauthorized: wrong token for read\u001b[2J"}`)
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	_, err := c.Get(context.Background())
	if !errors.Is(err, ErrUnauthorized) || err.Error() != "api: unauthorized: 401 Unauthorized: collector: unauthorized: wrong token for read [2J" {
		t.Fatalf("err = %q", err)
	}
}

// TestOtherAPIsObject: an object of another API, which would decode into
// an empty snapshot, is not shown as a collector with no load.
func TestOtherAPIsObject(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"UP","components":{"db":{"status":"UP"}}}`)
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL)
	_, err := c.Get(context.Background())
	if want := "JSON of another shape (an object with none of the fields of api.Snapshot)"; !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want ErrProtocol and %q", err, want)
	}
}

// TestEmptyObjectIsNotASnapshot: {} (another API's empty answer) is not a
// snapshot, whose time a collector always writes; it is still a policy
// part whose every field is omitted when empty.
func TestEmptyObjectIsNotASnapshot(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7070"+PathLive, nil)
	resp := &http.Response{Status: "200 OK", StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: req}
	var s Snapshot
	err := unmarshal(resp, []byte(" {} "), &s)
	if want := `an empty object where api.Snapshot always has "time"`; !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want ErrProtocol and %q", err, want)
	}
	var empty struct {
		Rules []string `json:"rules,omitempty"`
		Pause bool     `json:"paused,omitzero"`
	}
	if err := unmarshal(resp, []byte("{}"), &empty); err != nil {
		t.Fatalf("{} for a type whose fields are all omitted when empty: %v", err)
	}
}

// FuzzUnmarshal: whatever a server answers, decoding it never panics, and
// an error quotes it printable and bounded.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"time":"2026-01-02T03:04:05Z"}`, `{"hello":1}`, `null`, `[1]`, `{}`, `<html><title>x</title>`, "", `{"time":`} {
		f.Add(s, "application/json")
	}
	f.Add("<html><title>\x1b[2J</title>", "text/html")
	f.Fuzz(func(t *testing.T, body, ct string) {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7070"+PathLive, nil)
		resp := &http.Response{Status: "200 OK", StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Request: req}
		var s Snapshot
		if err := unmarshal(resp, []byte(body), &s); err != nil && (strings.ContainsFunc(err.Error(), Unprintable) || len(err.Error()) > 2000) {
			t.Fatalf("error not printable or unbounded: %q", err)
		}
		var rows []AuditRow
		unmarshal(resp, []byte(body), &rows)
	})
}

// TestPlainHTTPToTLS: http:// to a collector serving TLS says to use
// https:// (net/http answers 400 "Client sent an HTTP request to an HTTPS
// server" on a TLS port).
func TestPlainHTTPToTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	host := srv.Listener.Addr().String()
	cl, _ := NewClient("http://" + host)
	_, err := cl.Get(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the collector serves TLS there: use https://"+host) {
		t.Fatalf("%v", err)
	}
}
