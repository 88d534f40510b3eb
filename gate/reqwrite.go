package gate

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req to w in HTTP/1.1 wire form, as Request.Write
// does for the requests h1Client takes (no body or one of known length,
// no trailers), without its formatting, header sorting and allocations.
// A head it would have to clean (a line break in a value, a control byte
// in the host or path) is left to Request.Write.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	uri := req.URL.RequestURI()
	if !plainHead(host, uri, req.Header) {
		return req.Write(headWriter{w})
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	if _, ok := req.Header["User-Agent"]; !ok {
		// As Request.Write; ReverseProxy sets an empty one to send none.
		w.WriteString("User-Agent: Go-http-client/1.1\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		case "User-Agent":
			// One, and none when empty (ReverseProxy's way of sending
			// none).
			if len(vs) > 0 && vs[0] != "" {
				headerLine(w, k, vs[0])
			}
			continue
		}
		for _, v := range vs {
			headerLine(w, k, v)
		}
	}
	if req.Close && !strings.Contains(strings.ToLower(req.Header.Get("Connection")), "close") {
		w.WriteString("Connection: close\r\n")
	}
	n := req.ContentLength
	hasBody := req.Body != nil && req.Body != http.NoBody && n > 0
	if !hasBody {
		n = 0
	}
	if hasBody || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		var b [20]byte
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(b[:0], n, 10))
		w.WriteString("\r\n")
	}
	_, err := w.WriteString("\r\n")
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err != nil || !hasBody {
		return err
	}
	body := &bodyReader{r: req.Body}
	m, err := io.CopyN(w, body, n)
	if err == io.EOF {
		err = errors.New("request body shorter than its Content-Length " + strconv.FormatInt(n, 10) + ": " + strconv.FormatInt(m, 10))
	}
	if body.err != nil {
		return bodyReadError{body.err}
	}
	return err
}

// bodyReader keeps the error of a read of the client's body, to tell it
// from an error writing to the upstream.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// bodyReadError is an error reading the client's request body (it timed
// out or broke off), not the upstream's.
type bodyReadError struct{ err error }

func (e bodyReadError) Error() string { return "reading the request body: " + e.err.Error() }
func (e bodyReadError) Unwrap() error { return e.err }

func headerLine(w *bufio.Writer, k, v string) {
	w.WriteString(k)
	w.WriteString(": ")
	w.WriteString(v)
	w.WriteString("\r\n")
}

// plainHead reports whether the host is valid (and has no IPv6 zone),
// and the request URI and the header values are free of control bytes
// and line breaks, as the server that parsed them leaves them.
func plainHead(host, uri string, h http.Header) bool {
	if !httpguts.ValidHostHeader(host) || strings.IndexByte(host, '%') >= 0 || hasCTL(uri) {
		return false
	}
	for _, vs := range h {
		for _, v := range vs {
			if strings.IndexByte(v, '\n') >= 0 || strings.IndexByte(v, '\r') >= 0 {
				return false
			}
		}
	}
	return true
}

func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < ' ' || b == 0x7f {
			return true
		}
	}
	return false
}
