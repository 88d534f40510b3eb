// Package connlimit bounds the connections an HTTP server keeps open.
//
// Without a bound, connections that each sent one request (or none) and
// then stayed open take every file descriptor of the process: it stops
// accepting and its own files fail to open, for as long as they stay.
// A Listener keeps at most its bound; when a connection comes at the
// bound, the one idle the longest — waiting for its first request or for
// its next one — is closed to make room, as nginx closes keep-alive
// connections when it runs out. A client that sends a request a second is
// seldom the one idle the longest, and its HTTP client opens a new
// connection if it was. With no connection idle (every one in a request),
// the new one is closed at once.
//
// Use: wrap the listener (before TLS, so a handshake counts as idle), and
// tell the Listener when a connection is idle or busy: with net/http,
// set http.Server.ConnState to the Listener's ConnState; a server of its
// own calls Idle and Busy.
//
//	l := connlimit.New(ln, 10_000, connlimit.Hooks{Closed: count})
//	srv := &http.Server{Handler: h, ConnState: l.ConnState}
//	srv.Serve(tls.NewListener(l, cfg))
package connlimit

import (
	"container/list"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// Hooks are told of the Listener's counts (each may be nil).
type Hooks struct {
	// Opened is told when a connection takes a place (+1) or gives one
	// back (-1); a connection closed to make room for another gives its
	// place to it, and neither is told.
	Opened func(delta int)
	// Closed is told of a connection closed to stay within the bound:
	// reason "idle" (idle the longest, closed for a new one) or "refused"
	// (a new one, every other in a request).
	Closed func(reason string, from net.Addr)
}

// Listener is a net.Listener that keeps at most a bound of connections
// open. Safe for concurrent use.
type Listener struct {
	net.Listener
	max   int
	hooks Hooks

	mu   sync.Mutex
	open int
	idle list.List // of *Conn, idle the longest first
}

// New wraps ln: at most bound connections at once (at least 1).
func New(ln net.Listener, bound int, hooks Hooks) *Listener {
	return &Listener{Listener: ln, max: max(1, bound), hooks: hooks}
}

// Open is the number of connections open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Conn is a connection of a Listener.
type Conn struct {
	net.Conn
	l    *Listener
	idle *list.Element // its place in l.idle while idle (l.mu)
	gone bool          // its place was given back (l.mu)
}

// NetConn returns the connection underneath.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection underneath (net/http does before
// it closes after an error, so the client reads the answer rather than a
// reset).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// SyscallConn is the connection underneath's (syscall.Conn).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// Accept returns the next connection, closing the one idle the longest
// when the bound is reached, or the new one when none is idle. A new
// connection is idle until its first request.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *Conn
		if l.open >= l.max {
			e := l.idle.Front()
			if e == nil {
				l.mu.Unlock()
				l.closed("refused", c.RemoteAddr())
				c.Close()
				continue
			}
			victim = e.Value.(*Conn)
			victim.giveBack() // its place goes to c; its Close later gives none back
		}
		l.open++
		lc := &Conn{Conn: c, l: l}
		lc.idle = l.idle.PushBack(lc)
		l.mu.Unlock()
		if victim != nil {
			l.closed("idle", victim.RemoteAddr())
			victim.Conn.Close()
		} else if l.hooks.Opened != nil {
			l.hooks.Opened(1)
		}
		return lc, nil
	}
}

func (l *Listener) closed(reason string, from net.Addr) {
	if l.hooks.Closed != nil {
		l.hooks.Closed(reason, from)
	}
}

// Idle tells l that c (a connection it accepted, or one wrapping it, as
// a TLS connection does) waits for a request.
func (l *Listener) Idle(c net.Conn) {
	lc := l.of(c)
	if lc == nil {
		return
	}
	l.mu.Lock()
	if lc.idle == nil && !lc.gone {
		lc.idle = l.idle.PushBack(lc)
	}
	l.mu.Unlock()
}

// Busy tells l that c is in a request, or taken over (hijacked, handed
// to another server): it is not closed to make room.
func (l *Listener) Busy(c net.Conn) {
	lc := l.of(c)
	if lc == nil {
		return
	}
	l.mu.Lock()
	if lc.idle != nil {
		l.idle.Remove(lc.idle)
		lc.idle = nil
	}
	l.mu.Unlock()
}

// ConnState is an http.Server's ConnState hook for the connections of l:
// idle between requests, busy in one or taken over.
func (l *Listener) ConnState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateIdle:
		l.Idle(c)
	case http.StateActive, http.StateHijacked, http.StateClosed:
		l.Busy(c)
	}
}

// of finds the Conn of l under c (c itself, or under connections that
// wrap it and say what they wrap with NetConn, as tls.Conn does).
func (l *Listener) of(c net.Conn) *Conn {
	for c != nil {
		if lc, ok := c.(*Conn); ok {
			if lc.l != l {
				return nil
			}
			return lc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// giveBack gives c's place back, once (l.mu held).
func (c *Conn) giveBack() bool {
	if c.gone {
		return false
	}
	c.gone = true
	c.l.open--
	if c.idle != nil {
		c.l.idle.Remove(c.idle)
		c.idle = nil
	}
	return true
}

// Close closes the connection and gives its place back (once, however
// often it is closed).
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	gave := c.giveBack()
	c.l.mu.Unlock()
	if gave && c.l.hooks.Opened != nil {
		c.l.hooks.Opened(-1)
	}
	return err
}

// DefaultCeiling bounds DefaultBound (an idle HTTP connection costs about
// 23 KB in Go's net/http: 462 MB for 19,900 in one measurement).
const DefaultCeiling = 10_000

// DefaultBound is a bound for a server that has the process to itself:
// half the process's open-file limit (the rest for its files and other
// ports), at most DefaultCeiling, at least 64.
func DefaultBound() int {
	return max(64, min(openFileLimit()/2, DefaultCeiling))
}
