package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of GET /v1/live/stream.
const (
	// maxStreams bounds the live streams served at once; one more is
	// refused with 503 and a reason (poll /v1/live instead).
	maxStreams = 64
	// streamWriteTimeout bounds each event's write: a client that does
	// not read is dropped instead of holding its goroutine and buffers.
	streamWriteTimeout = 5 * time.Second
	// streamSendBuffer is the kernel's send buffer of a stream's
	// connection. With the default (up to 4 MB) a client that never
	// reads took tens of minutes to fill it at a few KB a second, and
	// only then would a write wait long enough to drop it: 64 clients
	// could hold every stream that long.
	streamSendBuffer = 16 << 10
)

// connKey is the context key of a request's connection (withConn).
type connKey struct{}

// withConn is the HTTP server's ConnContext: it keeps each connection in
// its requests' context, for the live stream to size its send buffer.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// shrinkSendBuffer sets the send buffer of r's connection (TCP, under TLS
// and the HTTP port's connection bound) to streamSendBuffer, when it can.
func shrinkSendBuffer(r *http.Request) {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	for c != nil {
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetWriteBuffer(streamSendBuffer)
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn }) // TLS, the connection bound
		if !ok {
			return
		}
		c = u.NetConn()
	}
}

// streams shares the encoded events among the clients of a stream: each
// snapshot (second × measure × top) is encoded once, whatever the number
// of clients.
type streams struct {
	n        atomic.Int64
	fullSaid atomic.Int64 // when the refusal of a stream was last logged (Unix s)
	encoded  atomic.Int64 // events encoded (once per snapshot, not per client)
	mu       sync.Mutex
	events   map[snapKey][]byte
}

// event returns the encoded server-sent event of the snapshot at now.
func (s httpAPI) event(now time.Time, measure string, n int) ([]byte, error) {
	key := snapKey{now.Unix(), measure, n}
	st := &s.streams
	st.mu.Lock()
	if b, ok := st.events[key]; ok {
		st.mu.Unlock()
		return b, nil
	}
	st.mu.Unlock()
	snap := s.Snapshot(now, measure, n)
	st.encoded.Add(1)
	j, err := json.Marshal(snap)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(j)+32)
	b = append(b, "event: snapshot\ndata: "...)
	b = append(b, j...)
	b = append(b, "\n\n"...)
	st.mu.Lock()
	if st.events == nil || len(st.events) > 64 {
		st.events = make(map[snapKey][]byte)
	}
	for k := range st.events {
		if k.sec < key.sec {
			delete(st.events, k)
		}
	}
	st.events[key] = b
	st.mu.Unlock()
	return b, nil
}

// handleStream sends one snapshot per second as a server-sent event.
func (s httpAPI) handleStream(w http.ResponseWriter, r *http.Request) {
	measure, n, err := s.parseLiveQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	s.serveEvents(w, r, func() ([]byte, error) { return s.event(s.cfg.Now(), measure, n) })
}

// serveEvents sends the event next makes, once a second, until the client
// leaves or the server stops: at most maxStreams streams at once (503
// beyond), each write within streamWriteTimeout. The live stream and the
// fleet's (fleet.go) both serve through it.
func (s httpAPI) serveEvents(w http.ResponseWriter, r *http.Request, next func() ([]byte, error)) {
	if s.streams.n.Add(1) > maxStreams {
		s.streams.n.Add(-1)
		if now := time.Now().Unix(); now-s.streams.fullSaid.Load() >= 60 {
			s.streams.fullSaid.Store(now)
			s.log.Warn("live streams: every slot is taken; new streams are refused (said at most once a minute)",
				"max", maxStreams, "remote", r.RemoteAddr)
		}
		writeError(w, http.StatusServiceUnavailable,
			fmt.Sprintf("too many live streams (%d at most); try again later or poll %s", maxStreams, "/v1/live"), 5*time.Second)
		return
	}
	defer s.streams.n.Add(-1)
	shrinkSendBuffer(r)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func() error {
		b, err := next()
		if err != nil {
			return err
		}
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // not every writer has deadlines
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if send() != nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	done := s.life.doneChan()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case <-t.C:
			if send() != nil {
				return
			}
		}
	}
}
