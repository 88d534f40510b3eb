package otlpin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/qtop-dev/qtop/report"
)

// The door's protections, shared by HTTP and gRPC: a memory budget
// reserved before bytes are read (so what arrives at once is bounded,
// whatever the number of clients; HTTP as its body arrives, bodyMemory),
// a minimum rate for a body's bytes, the expansion bound of gzip, and
// refusals held back (WithRefusalHold).

// memBudget is the memory the requests being received and decoded may
// reserve at once, in bytes, and at most half of it per connection (so one
// connection never takes it all). A request that does not fit is answered
// busy, retry later, after waiting up to reserveWait for a release
// (takeWait; a gRPC stream's reservation is given back when its
// context ends, just after its answer, so the next request of the same
// connection may otherwise find it still taken).
type memBudget struct {
	mu    sync.Mutex
	size  int64
	used  int64
	conns map[string]int64 // reserved per connection (gRPC), by peer address
	freed chan struct{}    // closed (and replaced) at each release
}

func newMemBudget(size int64) *memBudget {
	return &memBudget{size: size, conns: make(map[string]int64), freed: make(chan struct{})}
}

// holds says whether connection conn has memory reserved.
func (b *memBudget) holds(conn string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[conn] > 0
}

// takeWait is take, waiting up to wait (or ctx's end) for releases while
// n bytes do not fit.
func (b *memBudget) takeWait(ctx context.Context, conn string, n int64, wait time.Duration) error {
	err := b.take(conn, n)
	if err == nil || wait <= 0 {
		return err // the common case: no timer
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		b.mu.Lock()
		freed := b.freed
		b.mu.Unlock()
		if err := b.take(conn, n); err == nil {
			return nil
		}
		select {
		case <-freed:
		case <-t.C:
			return err
		case <-ctx.Done():
			return err
		}
	}
}

// errNoMemory: the budget cannot take a reservation now.
var errNoMemory = fmt.Errorf("%w: the memory for requests being received is taken", ErrBusy)

// take takes n bytes for connection conn ("": none), at most half the
// budget per connection; give gives them back.
func (b *memBudget) take(conn string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.size {
		return errNoMemory
	}
	if conn != "" {
		if b.conns[conn]+n > max(b.size/2, n) {
			return fmt.Errorf("%w: this connection's share of the memory for requests being received is taken; use more connections or fewer streams", ErrBusy)
		}
		b.conns[conn] += n
	}
	b.used += n
	return nil
}

func (b *memBudget) give(conn string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if conn != "" {
		if b.conns[conn] -= n; b.conns[conn] <= 0 {
			delete(b.conns, conn)
		}
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

func (b *memBudget) reserved() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// expansionLimit is what a compressed body of n bytes may decompress to:
// meter.MaxExpansion times n, at least meter.MinDecodedBytes, at most
// maxDecoded — the report door's bound, so memory follows what was sent.
func expansionLimit(n, maxDecoded int64) int64 {
	return min(maxDecoded, max(report.MinDecodedBytes, n*report.MaxExpansion))
}

// hold holds back the answer to a request refused for what it is
// (WithRefusalHold); it says whether it held it (false: the connection
// should be closed, too many refusals are already held).
func (r *Receiver) hold(ctx context.Context) bool {
	if r.cfg.hooks.hold == nil {
		return true
	}
	return r.cfg.hooks.hold(ctx)
}

// ErrSlow: a body arrived below the minimum rate (WithMinRate).
var ErrSlow = errors.New("otlpin: body sent too slowly")

// deadliner sets the read deadline of a request's connection
// (http.ResponseController does).
type deadliner interface{ SetReadDeadline(time.Time) error }

// rateReader reads a body that must arrive at minRate bytes a second after
// a grace: by start + grace + n/minRate it must have delivered n bytes.
// Before each read it sets the connection's read deadline to the moment
// the next chunk becomes late, so a client trickling bytes (or none) is cut
// then, not at a fixed read timeout.
type rateReader struct {
	r       io.Reader
	dl      deadliner
	start   time.Time
	grace   time.Duration
	minRate int64
	n       int64
	now     func() time.Time
}

// rateChunk is how many bytes ahead of what was received the deadline of
// the next read allows for.
const rateChunk = 4 << 10

func (rr *rateReader) Read(p []byte) (int, error) {
	due := rr.grace + time.Duration(float64(rr.n+rateChunk)/float64(rr.minRate)*float64(time.Second))
	if err := rr.dl.SetReadDeadline(rr.start.Add(due)); err != nil {
		return rr.r.Read(p) // a connection without deadlines: the server's read timeout applies
	}
	n, err := rr.r.Read(p)
	rr.n += int64(n)
	if err != nil && isTimeout(err) {
		return n, fmt.Errorf("%w: %d bytes in %v, at least %d bytes a second after %v", ErrSlow, rr.n, rr.now().Sub(rr.start).Round(time.Millisecond), rr.minRate, rr.grace)
	}
	return n, err
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// gunzipper is a gzip reader kept between requests: a new one allocates
// and clears its decompressor's tables and 32 KiB window (42 KB and 29
// allocations for a body of 100 spans); Reset reuses them. It is
// klauspost/compress's gzip (already the report door's zstd), not the
// standard library's: the same format and API, with 1 allocation where
// compress/flate made 23 per body of 100 spans, in ~0.7 times the time
// (BenchmarkGunzip).
type gunzipper struct {
	src bytes.Reader
	zr  gzip.Reader
}

var gunzippers = sync.Pool{New: func() any { return new(gunzipper) }}

// gunzip decompresses the gzip body z into buf, at most limit bytes (of
// expansionLimit(len(z), maxDecoded)). The trailer's ISIZE is the (last
// member's) length decompressed, mod 2^32: above the limit, the body is
// refused unread; below, it sizes the buffer once (a lie costs at most
// what the limit allows; a growing buffer allocated about three times
// what it held).
func gunzip(buf *bytes.Buffer, z []byte, limit, maxDecoded int64) error {
	tooLarge := func() error {
		return fmt.Errorf("%w: more than %d bytes once decompressed (the limit: %d times the %d bytes sent, or %d, whichever is less): send smaller batches (or protobuf rather than JSON)",
			ErrTooLarge, limit, report.MaxExpansion, len(z), maxDecoded)
	}
	if len(z) < 2 || z[0] != 0x1f || z[1] != 0x8b {
		// Before the trailer is read as one: a body that is not gzip at
		// all would be refused as too large by what its last bytes say.
		return fmt.Errorf("%w: gzip: invalid header (Content-Encoding says gzip, the body is not)", ErrMalformed)
	}
	if len(z) >= 18 {
		size := int64(binary.LittleEndian.Uint32(z[len(z)-4:]))
		if size > limit {
			// Refused unread. A body cut off in transit ends in bytes of
			// its stream, not its trailer, which most often read as a
			// size over the limit: the message says what was read.
			return fmt.Errorf("%w: its gzip trailer gives %d bytes once decompressed, more than %d (the limit: %d times the %d bytes sent, or %d, whichever is less): send smaller batches (or protobuf rather than JSON), or check that the body was sent whole: a cut-off body ends in bytes that read this way too",
				ErrTooLarge, size, limit, report.MaxExpansion, len(z), maxDecoded)
		}
		buf.Grow(int(size) + bytes.MinRead)
	}
	g := gunzippers.Get().(*gunzipper)
	defer func() {
		g.src.Reset(nil) // hold no request's bytes while pooled
		gunzippers.Put(g)
	}()
	g.src.Reset(z)
	if err := g.zr.Reset(&g.src); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err) // "gzip: invalid header", …
	}
	n, err := buf.ReadFrom(io.LimitReader(&g.zr, limit+1))
	if err != nil {
		return fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
	}
	if n > limit {
		return tooLarge()
	}
	return nil
}
