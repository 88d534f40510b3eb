package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// maxQuoted bounds, in bytes, the text of a server that an error quotes.
const maxQuoted = 200

// send sends req. When the server accepted the connection but gave no
// HTTP answer — it stayed silent until the deadline, closed the
// connection, or answered in something that is not HTTP — the error says
// so (ErrNoAnswer, ErrProtocol): something listens at the address, and it
// is not a collector answering. Other errors are "api: what: err".
func (c *Client) send(req *http.Request, what string) (*http.Response, error) {
	var accepted, fresh, wrote atomic.Bool // the hooks may run on the transport's goroutines
	trace := &httptrace.ClientTrace{
		GetConn: func(string) { accepted.Store(false); fresh.Store(false); wrote.Store(false) }, // each attempt
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				accepted.Store(true)
				fresh.Store(true)
			}
		},
		GotConn: func(info httptrace.GotConnInfo) {
			accepted.Store(true)
			fresh.Store(!info.Reused)
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) { wrote.Store(info.Err == nil) },
	}
	start := time.Now()
	resp, err := c.http.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err == nil {
		return resp, nil
	}
	if accepted.Load() && !errors.Is(err, context.Canceled) {
		if e := unanswered(req, err, time.Since(start), fresh.Load(), wrote.Load()); e != nil {
			return nil, e
		}
	}
	return nil, fmt.Errorf("api: %s: %w", what, err)
}

// unanswered says what went wrong with req after the server accepted its
// connection, or returns nil when err is no sign of a server that does
// not answer (a kept-alive connection the server closed, a certificate
// qtop cannot verify).
func unanswered(req *http.Request, err error, waited time.Duration, fresh, wrote bool) error {
	host, call := req.URL.Host, req.Method+" "+req.URL.Path
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	var (
		ne net.Error
		rh tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w: the server at %s accepted the connection but did not answer %s within %s: "+
			"it may not be a qtop collector, or it is overloaded; %s, and if it is, the collector's log and load",
			ErrNoAnswer, host, call, roundWait(waited), where(host))
	case !fresh:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("%w: the server at %s accepted the connection but closed it without answering %s (%s): "+
			"it may not be a qtop collector, or it is overloaded; %s", ErrNoAnswer, host, call, quote(cause.Error(), maxQuoted), where(host))
	case cause.Error() == "http: server gave HTTP response to HTTPS client": // net/http's text: no error value to match
		return fmt.Errorf("%w: the server at %s answers in plain HTTP, not TLS: if it is the collector, use http://%s",
			ErrProtocol, host, host)
	case errors.As(err, &rh):
		return fmt.Errorf("%w: the server at %s does not answer in TLS (%s): it is no collector serving TLS; %s",
			ErrProtocol, host, quote(cause.Error(), maxQuoted), where(host))
	case clientCertRefused(cause):
		return fmt.Errorf("%w: the server at %s requires a client certificate and refused this connection's (%s): "+
			"give one its --tls-client-ca signs, with --cert-file and --key-file (QTOP_CERT_FILE, QTOP_KEY_FILE)",
			ErrClientCert, host, quote(cause.Error(), maxQuoted))
	case wrote:
		return fmt.Errorf("%w: the server at %s answered %s with something that is not HTTP (%s): it is not a qtop collector; %s",
			ErrProtocol, host, call, quote(cause.Error(), maxQuoted), where(host))
	}
	return nil
}

// clientCertRefused says whether err is a TLS server's alert refusing the
// client's certificate, or its lack of one: "certificate required" (TLS
// 1.3, sent after the handshake, so it comes with the answer's first
// read), "bad certificate" or "unknown certificate authority". Go has no
// error value for a received alert; its text is all there is.
func clientCertRefused(err error) bool {
	s := err.Error()
	for _, a := range [...]string{"remote error: tls: certificate required", "remote error: tls: bad certificate",
		"remote error: tls: unknown certificate authority"} {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

// roundWait rounds a wait for a message: to the second from a second on.
func roundWait(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// where says what to check when the server at host is not the collector.
func where(host string) string {
	return "check that " + host + " is the collector's address and port (a collector listens on 7070 unless its --listen says otherwise)"
}

// checkStatus returns nil for a 2xx answer. Otherwise it returns
// ErrStatus (ErrUnauthorized for 401 and 403) with the collector's
// reason, or, when the answer is not a collector's JSON error, with what
// the server at the address answered instead.
func checkStatus(resp *http.Response) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	sentinel := ErrStatus
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		sentinel = ErrUnauthorized
	}
	var eb ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
		return fmt.Errorf("%w: %s: %s", sentinel, quote(resp.Status, maxQuoted), quote(eb.Error, 4*maxQuoted))
	}
	host, call := resp.Request.URL.Host, resp.Request.Method+" "+resp.Request.URL.Path
	hint := where(host)
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		hint = "if a proxy stands in front of the collector, it may want its own credentials; else " + hint
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		if t := string(bytes.TrimSpace(b)); t == "404 page not found" || t == "Method Not Allowed" {
			hint += "; or it is a collector older than this client, without " + call // net/http's own answers
		}
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		hint = "if a proxy stands in front of the collector, it cannot reach it; else " + hint
	case http.StatusBadRequest:
		if bytes.Contains(b, []byte("HTTP request to an HTTPS server")) { // net/http's answer on a TLS port
			hint = "the collector serves TLS there: use https://" + host + " (with --ca-file for a private CA)"
		}
	}
	return fmt.Errorf("%w: the server at %s answered %s with %s, not a qtop collector's JSON: %s",
		sentinel, host, call, answerOf(resp, b), hint)
}

// checkEventStream returns nil when resp, a 2xx answer, is an event
// stream; else ErrProtocol with what the server answered instead.
func checkEventStream(resp *http.Response) error {
	if mediaType(resp) == "text/event-stream" {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	host := resp.Request.URL.Host
	return fmt.Errorf("%w: the server at %s answered %s %s with %s, not a qtop collector's event stream: %s",
		ErrProtocol, host, resp.Request.Method, resp.Request.URL.Path, answerOf(resp, b), where(host))
}

// readJSON reads the body of resp, a 2xx answer, into v (unmarshal).
func readJSON(resp *http.Response, v any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxEventBytes+1))
	if err != nil {
		return fmt.Errorf("api: read: %w", err)
	}
	if len(b) > MaxEventBytes {
		return fmt.Errorf("%w: body larger than %d bytes", ErrProtocol, MaxEventBytes)
	}
	return unmarshal(resp, b, v)
}

// unmarshal decodes b, the JSON of the 2xx answer resp (its body, or an
// event of its stream), into v. Every answer the client decodes comes
// through here, so that what is not a collector's JSON — an empty body, a
// web page, JSON that does not parse, another API's JSON — is ErrProtocol
// saying what the server at the address answered instead.
func unmarshal(resp *http.Response, b []byte, v any) error {
	err := json.Unmarshal(b, v)
	other := ""
	if err == nil {
		if other = foreign(b, v); other == "" {
			return nil
		}
	}
	host, call := resp.Request.URL.Host, resp.Request.Method+" "+resp.Request.URL.Path
	var te *json.UnmarshalTypeError
	switch {
	case len(bytes.TrimSpace(b)) == 0, err != nil && !errors.As(err, &te) && !carriesJSON(mediaType(resp)):
		return fmt.Errorf("%w: the server at %s answered %s with %s, not a qtop collector's JSON: %s",
			ErrProtocol, host, call, answerOf(resp, b), where(host))
	case err == nil, errors.As(err, &te):
		if err != nil {
			other = quote(err.Error(), maxQuoted)
		}
		return fmt.Errorf("%w: the server at %s answered %s with JSON of another shape (%s): "+
			"it is not a qtop collector, or one of another version; %s", ErrProtocol, host, call, other, where(host))
	}
	return fmt.Errorf("%w: the server at %s answered %s with JSON that does not parse (%s): %s",
		ErrProtocol, host, call, quote(err.Error(), maxQuoted), where(host))
}

// foreign says why b, JSON that decoded into v without error, is still
// not v's (null, or an object with keys, none of them v's fields: another
// API's JSON), or returns "" when it is. An array is judged by its first
// element; an object whose first key is v's is v's, so a collector's
// answer is judged by its first bytes.
func foreign(b []byte, v any) string {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return ""
	}
	t, b = t.Elem(), bytes.TrimSpace(b)
	if t.Kind() == reflect.Slice {
		dec := json.NewDecoder(bytes.NewReader(b))
		var first json.RawMessage
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') || !dec.More() || dec.Decode(&first) != nil {
			return ""
		}
		t, b = t.Elem(), first
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	if string(b) == "null" {
		return "null where " + t.String() + " belongs"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	if !dec.More() {
		// {}: v's only if encoding/json can write v so, every field
		// omitted when empty (a policy part with no rules); a collector
		// writes a field without omitempty (a snapshot's time) always.
		if f, ok := alwaysWritten(t); ok {
			return "an empty object where " + t.String() + " always has " + strconv.Quote(f)
		}
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if k, ok := key.(string); ok && hasField(t, k) {
			return ""
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return "an object with none of the fields of " + t.String()
}

// alwaysWritten returns the JSON name of a field of the struct type t
// that encoding/json writes whatever its value (exported, not "-", no
// omitempty or omitzero), if there is one.
func alwaysWritten(t reflect.Type) (string, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || name == "-" || strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
			continue
		}
		if name == "" {
			name = f.Name
		}
		return name, true
	}
	return "", false
}

// hasField reports whether encoding/json decodes key into a field of the
// struct type t.
func hasField(t reflect.Type, key string) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && hasField(ft, key) {
				return true
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return true
		}
	}
	return false
}

// answerOf describes an answer for an error: its status and its body's
// content type, with the start of the body (of a web page, its title),
// e.g. `404 Not Found and text/html ("Error response")`.
func answerOf(resp *http.Response, b []byte) string {
	s := quote(resp.Status, maxQuoted) + " and "
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return s + "an empty body"
	}
	mt := mediaType(resp)
	switch {
	case mt == "":
		s += "no content type"
	default:
		s += quote(mt, maxQuoted)
	}
	if ex := excerpt(mt, b); ex != "" {
		s += ` ("` + ex + `")`
	}
	return s
}

// excerpt is the start of body b for an error, printable and bounded; of
// a web page, its title ("" when it has none).
func excerpt(mt string, b []byte) string {
	if mt != "text/html" && mt != "application/xhtml+xml" && b[0] != '<' {
		return quote(string(b), maxQuoted)
	}
	lower := asciiLower(b) // the same length as b, unlike bytes.ToLower
	i := bytes.Index(lower, []byte("<title"))
	if i < 0 {
		return ""
	}
	j := bytes.IndexByte(lower[i:], '>')
	if j < 0 {
		return ""
	}
	start := i + j + 1
	end := len(b)
	if k := bytes.Index(lower[start:], []byte("</title")); k >= 0 {
		end = start + k
	}
	return quote(string(b[start:end]), maxQuoted)
}

// asciiLower returns a copy of b with A–Z in lower case.
func asciiLower(b []byte) []byte {
	l := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		l[i] = c
	}
	return l
}

// mediaType is resp's content type without its parameters, lower case
// ("" when none or not parsable).
func mediaType(resp *http.Response) string {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// carriesJSON reports whether a body of media type mt is the collector's
// kind of JSON: JSON, or the events of its stream.
func carriesJSON(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/event-stream"
}

// quote makes s, text from a server, fit for an error: printable, its
// runs of spaces made one, at most n bytes (cut on a rune, then "…").
func quote(s string, n int) string {
	s = strings.Join(strings.Fields(Printable(s)), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
