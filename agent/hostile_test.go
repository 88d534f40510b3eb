package agent

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/tenant"
)

// TestPanicRecordedAsFailed: a handler that panics sends the client no
// answer (net/http cuts the connection); the agent records the request
// as failed, not as the 200 it had not yet written, and the panic still
// reaches net/http.
func TestPanicRecordedAsFailed(t *testing.T) {
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "")))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.HandleFunc("GET /abort", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "half an answer")
		panic(http.ErrAbortHandler)
	})
	h := a.Handler(mux)
	for _, path := range []string{"/boom", "/abort"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: the panic did not reach the server", path)
				}
			}()
			serve(h, "GET", path, "X-Tenant", "acme")
		}()
	}
	got := rows(a)
	for _, k := range []string{"acme|GET /boom|request", "acme|GET /abort|request"} {
		if r := got[k]; r.Count != 1 || r.Errors != 1 {
			t.Errorf("%s: %+v, want one failed request", k, r)
		}
	}
}

// TestHijackerForwarded: code that asserts http.Hijacker (WebSocket
// libraries, golang.org/x/net/websocket) gets the connection through the
// agent, and a hijacked connection gives its admission slot back, as
// Streaming does.
func TestHijackerForwarded(t *testing.T) {
	a := newAgent(t, WithTenant(FromHeader("X-Tenant", "")), WithSlots(1))
	hijacked, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ws" {
			io.WriteString(w, "ok")
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			http.Error(w, "not a Hijacker", http.StatusInternalServerError)
			return
		}
		c, bw, err := hj.Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer c.Close()
		bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		bw.Flush()
		close(hijacked)
		<-release
	})))
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nX-Tenant: acme\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "101") {
		close(release)
		t.Fatalf("upgrade answer %q, %v", line, err)
	}
	<-hijacked
	// The upgraded connection is open: the one slot must be free.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/next", nil)
	req.Header.Set("X-Tenant", "acme")
	resp, err := http.DefaultClient.Do(req)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("request while a hijacked connection is open: %d", resp.StatusCode)
	}
}

// TestFromHeaderRefusesDisagreeingCopies: an edge that adds its tenant
// header instead of replacing the client's leaves two; the agent must not
// take the client's (the first).
func TestFromHeaderRefusesDisagreeingCopies(t *testing.T) {
	f := FromHeader("X-Tenant", "X-Tier")
	for _, c := range []struct {
		name           string
		tenants, tiers []string
		want           string
		err            error
	}{
		{"one", []string{"acme"}, nil, "acme", nil},
		{"same twice", []string{"acme", "acme"}, []string{"T1", "T1"}, "acme", nil},
		{"client first, edge second", []string{"victim", "acme"}, nil, "", ErrAmbiguousTenant},
		{"empty first", []string{"", "acme"}, nil, "", ErrAmbiguousTenant},
		{"two tiers", []string{"acme"}, []string{"T0", "T3"}, "", ErrAmbiguousTenant},
		{"none", nil, nil, "", ErrNoTenant},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["X-Tenant"] = c.tenants
		r.Header["X-Tier"] = c.tiers
		got, err := f(r)
		if !errors.Is(err, c.err) || (c.err == nil && got.Tenant != c.want) {
			t.Errorf("%s: %+v, %v", c.name, got, err)
		}
	}
	// Refused before FirstOf tries a weaker source, and answered 400
	// without echoing the values.
	a := newAgent(t, WithTenant(FirstOf(FromHeader("X-Tenant", ""), FromBaggage())))
	h := a.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler ran") }))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header["X-Tenant"] = []string{strings.Repeat("v", 1000), "acme"}
	req.Header.Set("Baggage", "tenant.id=acme")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "vvvv") {
		t.Errorf("status %d, body %q", w.Code, w.Body.String())
	}
}

// TestFromPathSegmentAsServeMuxSees: the tenant charged is the segment a
// ServeMux {tenant} wildcard gives the handler; a segment that a handler
// or a proxy could read as another tenant is refused.
func TestFromPathSegmentAsServeMuxSees(t *testing.T) {
	f := FromPathSegment(1)
	for _, c := range []struct {
		path, want string
		err        error
	}{
		{"/t/acme/orders", "acme", nil},
		{"/t/ac%20me/orders", "ac me", nil},
		{"/t/acme%2Fx/orders", "", ErrAmbiguousTenant},           // ServeMux: "acme/x"
		{"/t/victim%2F..%2Facme/orders", "", ErrAmbiguousTenant}, // ServeMux: "victim/../acme"
		{"/t/%2E%2E/orders", "", ErrAmbiguousTenant},
		{"/t/../victim/orders", "", ErrAmbiguousTenant},
		{"/t/./orders", "", ErrAmbiguousTenant},
		{"/t//orders", "", ErrNoTenant},
		{"/t", "", ErrNoTenant},
		{"/t/acme;x=1/orders", "", ErrAmbiguousTenant}, // Tomcat, Spring: "acme"
		{"/t/acme;/orders", "", ErrAmbiguousTenant},
		{"/t/acme%3Bx/orders", "acme;x", nil}, // an encoded ';' is part of the name everywhere
		{"/t/%20/orders", "", ErrAmbiguousTenant},
		{"/t/acme%20/orders", "", ErrAmbiguousTenant},
	} {
		r := httptest.NewRequest("GET", "http://x"+c.path, nil)
		got, err := f(r)
		if !errors.Is(err, c.err) || got.Tenant != c.want {
			t.Errorf("%s: %+v, %v; want %q, %v", c.path, got, err, c.want, c.err)
		}
	}
	// What the handler sees, for a path the agent takes.
	a := newAgent(t, WithTenant(FromPathSegment(1)))
	mux := http.NewServeMux()
	var charged, served string
	mux.HandleFunc("GET /t/{tenant}/orders", func(_ http.ResponseWriter, r *http.Request) {
		tags, _ := tenant.From(r.Context())
		charged, served = tags.Tenant, r.PathValue("tenant")
	})
	if w := serve(a.Handler(mux), "GET", "/t/ac%20me/orders"); w.Code != http.StatusOK || charged != served {
		t.Errorf("status %d: charged %q, served %q", w.Code, charged, served)
	}
	if w := serve(a.Handler(mux), "GET", "/t/acme%2Fx/orders"); w.Code != http.StatusBadRequest {
		t.Errorf("encoded slash: status %d, want 400", w.Code)
	}
}

// TestBearerSchemeAnyCase: the authentication scheme's name is
// case-insensitive (RFC 9110 §11.1): "bearer" is "Bearer".
func TestBearerSchemeAnyCase(t *testing.T) {
	key := []byte("k3y")
	enc := base64.RawURLEncoding
	s := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(`{"org":"acme"}`))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	tok := s + "." + enc.EncodeToString(m.Sum(nil))
	f := FromJWT(key, "org", "")
	for _, c := range []struct {
		h  string
		ok bool
	}{
		{"Bearer " + tok, true},
		{"bearer " + tok, true},
		{"BEARER " + tok, true},
		{"Bearer ", false},
		{"Basic " + tok, false},
		{"Bearer" + tok, false},
		{"", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", c.h)
		got, err := f(r)
		if ok := err == nil && got.Tenant == "acme"; ok != c.ok {
			t.Errorf("%.20q: %+v, %v", c.h, got, err)
		} else if !ok && !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%.20q: %v, want ErrUnauthorized", c.h, err)
		}
	}
}
