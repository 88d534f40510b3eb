package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// rawConn posts reports over one keep-alive HTTP/1.1 connection with
// requests built before the run and a minimal response reader: the same
// bytes on the wire as net/http's client sends, at a fraction of its CPU,
// so that on a machine shared with the collector the load generator takes
// less of the cores the collector is measured on.
type rawConn struct {
	addr, token string
	c           net.Conn
	r           *bufio.Reader
}

// request is the whole HTTP request for body.
func (rc *rawConn) request(path, ct string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", path, rc.addr, ct, len(body))
	if rc.token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", rc.token)
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// do sends req and returns the status and the body of the answer.
func (rc *rawConn) do(req []byte) (int, []byte, error) {
	if rc.c == nil {
		c, err := net.DialTimeout("tcp", rc.addr, 5*time.Second)
		if err != nil {
			return 0, nil, err
		}
		rc.c, rc.r = c, bufio.NewReaderSize(c, 4096)
	}
	status, body, closeAfter, err := rc.roundTrip(req)
	if err != nil || closeAfter {
		rc.c.Close()
		rc.c = nil
	}
	return status, body, err
}

func (rc *rawConn) roundTrip(req []byte) (status int, body []byte, closeAfter bool, err error) {
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := rc.c.Write(req); err != nil {
		return 0, nil, true, err
	}
	tp := textproto.NewReader(rc.r)
	line, err := tp.ReadLine()
	if err != nil {
		return 0, nil, true, err
	}
	_, code, ok := strings.Cut(line, " ")
	if !ok || len(code) < 3 {
		return 0, nil, true, fmt.Errorf("status line %q", line)
	}
	if status, err = strconv.Atoi(code[:3]); err != nil {
		return 0, nil, true, fmt.Errorf("status line %q", line)
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return 0, nil, true, err
	}
	if strings.EqualFold(hdr.Get("Transfer-Encoding"), "chunked") {
		// A reply the collector streams (one larger than its write
		// buffer) comes chunked, without a Content-Length.
		if body, err = io.ReadAll(io.LimitReader(httputil.NewChunkedReader(rc.r), 1<<20+1)); err != nil {
			return 0, nil, true, err
		}
		if len(body) > 1<<20 {
			return 0, nil, true, fmt.Errorf("chunked reply over 1 MiB")
		}
	} else {
		n, err := strconv.Atoi(hdr.Get("Content-Length"))
		if err != nil || n < 0 || n > 1<<20 {
			return 0, nil, true, fmt.Errorf("Content-Length %q", hdr.Get("Content-Length"))
		}
		body = make([]byte, n)
		if _, err := io.ReadFull(rc.r, body); err != nil {
			return 0, nil, true, err
		}
	}
	return status, body, strings.EqualFold(hdr.Get("Connection"), "close"), nil
}
